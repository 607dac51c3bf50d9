// ltd as a systemd Type=notify service: READY=1 once it listens and has
// re-attached its running jobs' supervisors, STATUS= with what runs and
// waits (on change, at most once per kStatusInterval), STOPPING=1 on
// shutdown, and WATCHDOG=1 pings
// from the loop thread itself, so that a wedged loop stops pinging and
// systemd restarts ltd. Messages go through libsystemd's sd_notify; outside
// systemd (no NOTIFY_SOCKET) they cost nothing. Loop thread only.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "clock.h"
#include "job_events.h"

namespace ltd {

class SystemdNotifier final : public JobEvents {
 public:
  struct Counts {
    size_t running = 0;
    size_t pending = 0;
  };
  using Send = std::function<void(const std::string& state)>;
  static constexpr Millis kStatusInterval{1000};

  // `counts` is asked on the loop, only when a STATUS= is due. `send`
  // defaults to sd_notify; tests record what would be sent.
  SystemdNotifier(Clock& clock, std::function<Counts()> counts, Send send = SdNotify);
  ~SystemdNotifier() override;  // cancels its timers
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  static void SdNotify(const std::string& state);
  // systemd's WatchdogSec= for this process (sd_watchdog_enabled), if set.
  static std::optional<Millis> WatchdogPeriod();

  void Ready();     // READY=1 and the first STATUS=
  void Stopping();  // STOPPING=1; STATUS= says so from now on
  // Pings WATCHDOG=1 now and then every `period`/2 on the loop's own timers.
  void StartWatchdog(Millis period);
  // Test only (LTD_TEST_WEDGE_AFTER_MS): after `after`, tells the notify
  // socket X_LTD_TEST=wedged and blocks the loop thread for good, as a
  // deadlock would; watchdog pings stop with it.
  void WedgeLoopAfter(Millis after);

  void OnSubmitted(const Job&) override { PokeStatus(); }
  void OnStateChanged(const Job&, JobState) override { PokeStatus(); }
  // `systemctl status` says a drain: "draining (swap GPU 3): 2 running, 1 pending".
  void OnDrainChanged(const std::optional<std::string>& reason) override {
    drain_ = reason;
    PokeStatus();
  }

 private:
  void PokeStatus();
  void SendStatus();
  void Ping();
  // "draining (REASON): " while drained, else "".
  std::string DrainPrefix() const;

  Clock& clock_;
  std::function<Counts()> counts_;
  Send send_;
  bool ready_ = false;
  bool stopping_ = false;
  std::optional<std::string> drain_;
  std::string last_status_;
  std::optional<Millis> last_status_at_;
  Clock::TimerId status_timer_ = 0;
  Millis ping_every_{0};
  Clock::TimerId ping_timer_ = 0;
  Clock::TimerId wedge_timer_ = 0;
};

}  // namespace ltd
