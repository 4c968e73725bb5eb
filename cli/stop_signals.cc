#include "cli/stop_signals.h"

#include <unistd.h>

namespace servesim {
namespace {

constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  if (g_stop.exchange(true)) {
    // Only write() is safe here: the run is already closing; say so again.
    static const char kNote[] = "sim: closing the run; its rows are being written (SIGKILL abandons it)\n";
    const ssize_t ignored = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);
    (void)ignored;
  }
}

}  // namespace

StopSignals::StopSignals() {
  g_stop.store(false);
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &previous_[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

const std::atomic<bool>* StopSignals::flag() const { return &g_stop; }

int StopSignals::signal() const { return g_signal.load(); }

}  // namespace servesim
