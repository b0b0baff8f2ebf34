#include "scheduler/daemon/web.h"

#include <ctime>

#include "scheduler/daemon/dashboard.h"
#include "scheduler/daemon/metrics.h"

namespace ember::sched {

namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

}  // namespace

WebEndpoint::WebEndpoint(const std::string& address, bool allow_remote, std::function<void(const std::string&)> log)
    : server_(std::make_unique<HttpServer>(
          address, allow_remote, [this](const HttpRequest& r) { return handle(r); }, std::move(log))) {
  server_->start();  // only now: the handler reads server_
}

HttpResponse WebEndpoint::handle(const HttpRequest& req) {
  if (req.path == "/") return {200, "text/html; charset=utf-8", dashboard_html()};
  if (req.path == "/dashboard.js") return {200, "text/javascript; charset=utf-8", dashboard_js()};
  if (req.path == "/dashboard.css") return {200, "text/css; charset=utf-8", dashboard_css()};
  const std::shared_ptr<const DaemonSnapshot> s = box_.latest();
  const bool data = req.path == "/metrics" || req.path == "/api/state";
  // Before the event loop's first turn there is nothing to show yet.
  if (data && !s) return {503, "text/plain; charset=utf-8", "the daemon is starting; try again in a moment\n"};
  if (req.path == "/metrics")
    return {200, kMetricsContentType, render_metrics(*s, progress_, server_->answered(), now_s())};
  if (req.path == "/api/state") return {200, "application/json", render_state_json(*s, progress_, now_s())};
  return {404, "text/plain; charset=utf-8", "no such page: the endpoint serves /, /metrics and /api/state\n"};
}

}  // namespace ember::sched
