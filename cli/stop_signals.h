// Stopping a run cleanly. While a StopSignals object lives, SIGINT (Ctrl-C), SIGTERM (what job
// schedulers such as Slurm, Kubernetes and Ray send) and SIGHUP (a closed terminal) no longer kill
// the process: the first one raises a flag that the simulator polls, so the run ends as
// `interrupted` with what it logged; later ones only repeat that the run is being closed (SIGKILL
// still kills, and `sim report` then shows the run as abandoned). The handlers are installed even
// where the signal was inherited as ignored (a job started with `&` from a script), and the previous
// dispositions come back on destruction.
#pragma once

#include <atomic>
#include <csignal>

namespace servesim {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The flag the simulator polls (Simulator::run).
  const std::atomic<bool>* flag() const;
  bool requested() const { return flag()->load(); }
  // The signal that asked to stop, or 0.
  int signal() const;

 private:
  struct sigaction previous_[3];
};

}  // namespace servesim
