// The daemon's web endpoint (`ember sched serve --http ADDR`): the HTTP server (http_server.h)
// with its routes, /metrics (metrics.h), / and its files and /api/state (dashboard.h), answered
// from the latest snapshot the event loop published (snapshot.h). Off unless --http is given.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "scheduler/daemon/http_server.h"
#include "scheduler/daemon/progress.h"
#include "scheduler/daemon/snapshot.h"

namespace ember::sched {

class WebEndpoint {
 public:
  // Listens now: throws ember::Error naming the address (see HttpServer).
  WebEndpoint(const std::string& address, bool allow_remote, std::function<void(const std::string&)> log);

  // Called by the event loop: the state every request after this one sees.
  void publish(std::shared_ptr<const DaemonSnapshot> s) { box_.publish(std::move(s)); }
  std::string url() const { return server_->url(); }

 private:
  HttpResponse handle(const HttpRequest& req);

  SnapshotBox box_;
  ProgressReader progress_;             // used on the server's thread only
  std::unique_ptr<HttpServer> server_;  // last: its thread stops before the rest goes
};

}  // namespace ember::sched
