// Elastic jobs in the daemon (docs/scheduler/elastic.md, "The daemon's elastic jobs"): before the
// rigid policy decides, every queued and running job goes through the goodput allocator the
// simulator's goodput policy uses (elastic/allocate.h), elastic jobs with the goodput their own
// reports give (elastic/live_job.h), the others as rigid gangs. A queued elastic job's gang becomes
// what it was allocated; a running one allocated another size is stopped through its checkpoint
// (the preemption path every job has) and requeued at that size, to be started by the policy with
// the global batch and learning-rate factor of the new size.
#include <algorithm>
#include <cstdio>

#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/elastic/allocate.h"

namespace ember::sched::daemon_impl {

namespace {

// The goodput policy's defaults (docs/scheduler/elastic.md): fairness p = 0.5, Tiresias's 16
// GPU-hours for the least-attained-service weight, 8 GPUs of lookahead, and a job grows to at most
// twice the most devices it has held (its throughput there is a guess until it has run there).
constexpr double kFairnessP = 0.5, kLasSeconds = 16 * 3600.0, kExplore = 2;
constexpr int kLookahead = 8;

elastic::LiveJob::Learned from_proto(const proto::ElasticLearned& p) {
  elastic::LiveJob::Learned l;
  l.local = static_cast<long>(p.local_batch());
  l.init_batch = static_cast<long>(p.init_batch());
  for (const proto::ElasticMeasured& m : p.measured())
    l.at[m.devices()] = elastic::LiveJob::Measured{static_cast<long>(m.batch()), m.step_s(), m.sync_s()};
  if (p.has_noise_scale()) l.noise_scale = p.noise_scale();
  l.most_held = p.most_held();
  return l;
}

}  // namespace

Daemon::ElasticState& Daemon::elastic_state(const JobRecord& r) {
  auto it = elastic_.find(r.info.id());
  if (it != elastic_.end()) return it->second;
  const proto::ElasticRange& range = r.info.spec().elastic();
  if (!r.info.has_elastic_learned())
    return elastic_.emplace(r.info.id(), ElasticState{elastic::LiveJob(range.min(), range.max(), range.max_batch())})
        .first->second;
  // An earlier daemon's: the job goes on with the batch, rate factor and throughputs it had.
  const proto::ElasticLearned& p = r.info.elastic_learned();
  ElasticState e{elastic::LiveJob(range.min(), range.max(), range.max_batch(), from_proto(p))};
  e.last_step = p.last_step();
  e.resizes = p.resizes();
  return elastic_.emplace(r.info.id(), std::move(e)).first->second;
}

void Daemon::remember_elastic(JobRecord& r, const ElasticState& e) {
  const elastic::LiveJob::Learned& l = e.model.learned();
  proto::ElasticLearned& p = *r.info.mutable_elastic_learned();
  p.set_local_batch(l.local);
  p.set_init_batch(l.init_batch);
  p.clear_measured();
  for (const auto& [k, m] : l.at) {
    proto::ElasticMeasured& x = *p.add_measured();
    x.set_devices(k);
    x.set_batch(m.batch);
    x.set_step_s(m.step_s);
    x.set_sync_s(m.sync_s);
  }
  if (l.noise_scale)
    p.set_noise_scale(*l.noise_scale);
  else
    p.clear_noise_scale();
  p.set_most_held(l.most_held);
  p.set_resizes(e.resizes);
  p.set_last_step(e.last_step);
}

void Daemon::read_elastic_report(JobRecord& r, ElasticState& e) {
  if (r.info.state() != proto::RUNNING) return;
  const std::optional<proto::JobProgress> p = progress_.read(r.info.log_path());
  // A report of this run only: the log keeps the earlier runs' lines, and a resumed run's first
  // report comes after the step its checkpoint was written at.
  if (!p || p->step() <= e.last_step || !p->has_batch() || !p->has_steps_per_s()) return;
  e.last_step = p->step();
  const int ranks = static_cast<int>(r.job.devices.size());
  e.model.report(ranks, static_cast<long>(p->batch()), p->steps_per_s(),
                 p->has_noise_scale() ? std::optional<double>(p->noise_scale()) : std::nullopt,
                 p->has_sync_s() ? std::optional<double>(p->sync_s()) : std::nullopt);
  // On two ranks or more the run is looked at again once it has also measured its noise scale.
  e.reported = e.reported || ranks == 1 || p->has_noise_scale();
  // Persisted with the job's next transition (the resize this report may lead to, at the latest).
  remember_elastic(r, e);
}

elastic::CountRequest Daemon::count_request(JobRecord& r, double now) {
  elastic::CountRequest q;
  q.held = r.info.state() == proto::RUNNING ? static_cast<int>(r.job.devices.size()) : 0;
  q.weight = 1.0 / (1.0 + r.info.run_seconds() * r.job.spec.gpus / kLasSeconds);
  if (!r.info.spec().has_elastic()) {
    q.rigid = true;
    q.gpus = q.most = r.job.spec.gpus;
    return q;
  }
  ElasticState& e = elastic_state(r);
  read_elastic_report(r, e);
  q.goodput = e.model.goodput_table();
  q.most = std::min(e.model.max(), std::max(e.model.min(), static_cast<int>(kExplore * e.model.most_held())));
  // A restart's cost amortised over the job's life, as the simulator's goodput policy does.
  q.keep = std::max(0.0, 1.0 - opt_.elastic_restart_s / std::max(now - r.info.submit_time(), 1.0));
  return q;
}

void Daemon::elastic_pass(double now) {
  std::vector<JobRecord*> jobs;
  std::vector<elastic::CountRequest> req;
  int free = cluster_.num_devices();
  bool any = false;
  for (JobRecord* r : active_jobs()) {
    if (r->info.state() == proto::STOPPING) {  // its devices stay taken until it exits
      free -= static_cast<int>(r->job.devices.size());
      continue;
    }
    any = any || r->info.spec().has_elastic();
    req.push_back(count_request(*r, now));
    jobs.push_back(r);
  }
  if (!any) return;
  const std::vector<int> k = elastic::allocate_counts(req, free, kFairnessP, kLookahead);
  for (size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i]->info.spec().has_elastic()) resize(*jobs[i], k[i]);
}

void Daemon::resize(JobRecord& r, int allocated) {
  ElasticState& e = elastic_state(r);
  // Below its minimum (or nothing): it waits, or goes on, at its minimum.
  const int want = std::clamp(allocated, e.model.min(), e.model.max());
  if (r.info.state() == proto::QUEUED) {
    r.job.spec.gpus = want;
    return;
  }
  const int now = static_cast<int>(r.job.devices.size());
  // Resized only once it has reported from its current size (its throughput there is measured),
  // and grown only onto devices free now: never preempted for devices it would then wait for.
  if (want == now || !e.reported || (want > now && cluster_.free().total_free() < want - now)) return;
  r.job.spec.gpus = want;
  ++e.resizes;
  remember_elastic(r, e);
  stop(r, StopKind::kPreempt, detail::concat("elastic: resized from ", now, " to ", want, " devices (goodput policy)"));
}

void Daemon::elastic_launch_env(JobRecord& r, Launch& l) {
  if (!r.info.spec().has_elastic()) return;
  ElasticState& e = elastic_state(r);
  const int k = static_cast<int>(r.job.devices.size());
  e.model.held(k);
  e.reported = false;
  // Every report already in the log is an earlier run's (the run before this one has exited), even
  // one it printed after the daemon's last look: none of them may be taken for this run's size.
  if (const std::optional<proto::JobProgress> p = progress_.read(r.info.log_path()))
    e.last_step = std::max(e.last_step, p->step());
  remember_elastic(r, e);
  l.env["EMBER_ELASTIC_RANKS"] = std::to_string(k);
  const long batch = e.model.batch(k);
  if (batch <= 0) return;  // its first run: the job's own batch and rate
  char scale[32];
  std::snprintf(scale, sizeof scale, "%.17g", e.model.lr_scale(k));
  l.env["EMBER_ELASTIC_BATCH"] = std::to_string(batch);
  l.env["EMBER_ELASTIC_LR_SCALE"] = scale;
  // Above what the devices held in the first run: micro-batches, a factor on the job's own --accumulate.
  const long passes = e.model.accumulate(k);
  if (passes > 1) l.env["EMBER_ELASTIC_ACCUMULATE"] = std::to_string(passes);
  say("job ", r.info.id(), " elastic: ", k, " devices, global batch ", batch,
      passes > 1 ? detail::concat(" in ", passes, " accumulated passes") : std::string(), ", learning rate x ", scale,
      e.model.noise_scale() ? detail::concat(" (noise scale ", *e.model.noise_scale(), ")") : std::string());
}

bool Daemon::elastic_running() const {
  for (const auto& [id, r] : active_)
    if (r->info.spec().has_elastic() && r->info.state() == proto::RUNNING) return true;
  return false;
}

}  // namespace ember::sched::daemon_impl
