#include "systemd_notify.h"

#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "bytes.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

SystemdNotifier::SystemdNotifier(Clock& clock, std::function<Counts()> counts, Send send)
    : clock_(clock), counts_(std::move(counts)), send_(std::move(send)) {}

SystemdNotifier::~SystemdNotifier() {
  for (Clock::TimerId t : {status_timer_, ping_timer_, wedge_timer_}) {
    if (t != 0) clock_.CancelTimer(t);
  }
}

void SystemdNotifier::SdNotify(const std::string& state) {
  // unset_environment=0: every later message needs NOTIFY_SOCKET again.
  // ltd's children never see it: lt-exec starts with an empty environment.
  const int r = sd_notify(0, state.c_str());
  if (r < 0) {
    static bool logged = false;  // once: a watchdog would repeat it forever
    if (!logged) spdlog::warn("sd_notify({}): {}", state, std::strerror(-r));
    logged = true;
  }
}

std::optional<Millis> SystemdNotifier::WatchdogPeriod() {
  uint64_t usec = 0;
  // sd_watchdog_enabled checks WATCHDOG_PID against this process.
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::max(Millis(1), std::chrono::duration_cast<Millis>(std::chrono::microseconds(usec)));
}

void SystemdNotifier::Ready() {
  ready_ = true;
  const Counts c = counts_();
  last_status_ = Cat("ready: ", DrainPrefix(), c.running, " running, ", c.pending, " pending");
  last_status_at_ = clock_.Monotonic();
  send_(Cat("READY=1\nSTATUS=", last_status_, "\nMAINPID=", getpid()));
}

void SystemdNotifier::Stopping() {
  stopping_ = true;
  send_("STOPPING=1\nSTATUS=stopping: tearing jobs down");
  last_status_ = "stopping";
}

void SystemdNotifier::PokeStatus() {
  if (!ready_ || status_timer_ != 0) return;
  // On change, but never more often than kStatusInterval; always from a
  // timer, so the manager is done with its change when counts are taken.
  Millis delay{0};
  if (last_status_at_) {
    delay = std::max(Millis(0), *last_status_at_ + kStatusInterval - clock_.Monotonic());
  }
  status_timer_ = clock_.StartTimer(delay, [this] {
    status_timer_ = 0;
    SendStatus();
  });
}

void SystemdNotifier::SendStatus() {
  const Counts c = counts_();
  std::string status = stopping_
                           ? Cat("stopping: ", c.running, " running, ", c.pending, " pending")
                           : Cat(DrainPrefix(), c.running, " running, ", c.pending, " pending");
  if (status == last_status_) return;
  last_status_ = status;
  last_status_at_ = clock_.Monotonic();
  send_("STATUS=" + status);
}

std::string SystemdNotifier::DrainPrefix() const {
  if (!drain_) return "";
  // One line of text: an admin's reason may hold anything.
  return drain_->empty() ? "draining: "
                         : Cat("draining (", DisplayEscape(*drain_, Controls::kEscape), "): ");
}

void SystemdNotifier::StartWatchdog(Millis period) {
  ping_every_ = std::max(Millis(1), period / 2);
  spdlog::info("systemd watchdog: {} ms; pinging every {} ms from the loop", period.count(),
               ping_every_.count());
  Ping();
}

void SystemdNotifier::Ping() {
  send_("WATCHDOG=1");
  ping_timer_ = clock_.StartTimer(ping_every_, [this] {
    ping_timer_ = 0;
    Ping();
  });
}

void SystemdNotifier::WedgeLoopAfter(Millis after) {
  spdlog::warn("LTD_TEST_WEDGE_AFTER_MS: this ltd will wedge its loop in {} ms (a test hook)",
               after.count());
  wedge_timer_ = clock_.StartTimer(after, [this] {
    wedge_timer_ = 0;
    spdlog::warn("test hook: wedging the loop thread now");
    send_("X_LTD_TEST=wedged");
    for (;;) pause();  // as a deadlock would; only SIGKILL ends it
  });
}

}  // namespace ltd
