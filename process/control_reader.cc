#include "control_reader.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

namespace {

// The most an unprivileged writer can make a pipe hold (pipe-max-size).
constexpr double kMaxPipeBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<ControlReader>> ControlReader::Create(uv_loop_t* loop) {
  Fd epoll(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    return absl::UnavailableError(Cat("epoll_create1: ", std::strerror(errno)));
  }
  int rc = 0;
  auto poll =
      UvInit<uv_poll_t>([&](uv_poll_t* h) { return rc = uv_poll_init(loop, h, epoll.get()); });
  if (!poll) return absl::UnavailableError(Cat("uv_poll_init(epoll): ", uv_strerror(rc)));
  auto tick = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop, h); });
  auto unpark = UvInit<uv_timer_t>([&](uv_timer_t* h) { return uv_timer_init(loop, h); });
  return std::unique_ptr<ControlReader>(new ControlReader(loop, std::move(epoll), std::move(poll),
                                                          std::move(tick), std::move(unpark)));
}

ControlReader::ControlReader(uv_loop_t* loop, Fd epoll, UvPtr<uv_poll_t> poll,
                             UvPtr<uv_timer_t> tick, UvPtr<uv_timer_t> unpark)
    : loop_(loop),
      epoll_(std::move(epoll)),
      poll_(std::move(poll)),
      tick_(std::move(tick)),
      unpark_(std::move(unpark)) {
  poll_->data = this;
  tick_->data = this;
  unpark_->data = this;
  // Heartbeats never keep the loop alive on their own: ranks' exits do.
  uv_unref(reinterpret_cast<uv_handle_t*>(poll_.get()));
  uv_unref(reinterpret_cast<uv_handle_t*>(tick_.get()));
  uv_unref(reinterpret_cast<uv_handle_t*>(unpark_.get()));
  window_start_ms_ = uv_now(loop_);
  Watch();
}

ControlReader::~ControlReader() {
  poll_.reset();  // before the epoll fd it polls is closed
  tick_.reset();
  unpark_.reset();
  entries_.clear();  // closes the fds; the epoll set goes with epoll_
}

void ControlReader::Watch() {
  ticking_ = false;
  uv_timer_stop(tick_.get());
  uv_poll_start(poll_.get(), UV_READABLE, [](uv_poll_t* h, int status, int) {
    if (status < 0) spdlog::warn("heartbeat epoll: {}", uv_strerror(status));
    static_cast<ControlReader*>(h->data)->ReadBatch();
  });
}

uint64_t ControlReader::TickMs() const {
  const uint64_t ms = entries_.size() * 1000 / kCoalesceAbove;
  return std::clamp<uint64_t>(ms, 1, kMaxBatchDelayMs);
}

void ControlReader::Tick() {
  ticking_ = true;
  tick_ms_ = TickMs();
  uv_poll_stop(poll_.get());
  uv_timer_start(
      tick_.get(), [](uv_timer_t* t) { static_cast<ControlReader*>(t->data)->ReadBatch(); },
      tick_ms_, tick_ms_);
}

absl::StatusOr<ControlReader::Id> ControlReader::Add(Fd fd, OnData on_data, std::string name) {
  const Id id = next_id_++;
  epoll_event ev{};
  // Edge-triggered: a ready fd is reported once per arrival, not re-polled
  // on every batch while it holds data; ReadAll empties it each time.
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = id;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) {
    return absl::UnavailableError(Cat("epoll_ctl(ADD, fd ", fd.get(), "): ", std::strerror(errno)));
  }
  uv_update_time(loop_);
  Entry entry{.fd = std::move(fd),
              .on_data = std::move(on_data),
              .name = std::move(name),
              .budget = TokenBucket::Full(bytes_per_second_, uv_now(loop_))};
  entries_.emplace(id, std::move(entry));
  return id;
}

void ControlReader::ReadBatch() {
  ++wakeups_;
  uv_update_time(loop_);  // budgets grow by the time now, not the loop turn's
  constexpr int kMax = 256;
  epoll_event events[kMax];
  // After a batch delay every fd of a large job may be ready: take them
  // all (each is reported once, so the rounds are bounded).
  for (size_t rounds = entries_.size() / kMax + 1; rounds > 0; --rounds) {
    const int n = epoll_wait(epoll_.get(), events, kMax, 0);
    for (int i = 0; i < n; ++i) {
      // A copy: epoll_event is packed on x86-64, and find() takes a
      // reference, which would be a misaligned one.
      const Id id = events[i].data.u64;
      auto it = entries_.find(id);
      if (it == entries_.end()) continue;
      if (!it->second.parked && !ReadAll(it->first, it->second)) Remove(it);
    }
    window_reads_ += static_cast<uint64_t>(std::max(n, 0));
    if (n < kMax) break;
  }
  if (!parked_.empty()) Unpark();  // a deadline's ReadNow takes what their budget allows
  const uint64_t now = uv_now(loop_);
  if (now - window_start_ms_ < 1000) return;
  // Batching keeps reads near the threshold: back to readiness only once
  // they fall well below it, or the modes would take turns.
  const uint64_t reads = window_reads_;
  window_reads_ = 0;
  window_start_ms_ = now;
  if (!ticking_ && reads > kCoalesceAbove) {
    Tick();
  } else if (ticking_ && reads < kCoalesceAbove / 8) {
    Watch();
  } else if (ticking_ && TickMs() != tick_ms_) {
    Tick();  // ranks came or went
  }
}

bool ControlReader::ReadAll(Id id, Entry& entry) {
  entry.budget.Grow(uv_now(loop_));
  for (;;) {
    if (entry.budget.bytes < 1) {
      Park(id, entry);
      return true;
    }
    const size_t want =
        entry.budget.bytes >= sizeof buf_ ? sizeof buf_ : static_cast<size_t>(entry.budget.bytes);
    const ssize_t n = read(entry.fd.get(), buf_, want);
    if (n > 0) {
      entry.budget.bytes -= static_cast<double>(n);
      entry.on_data(std::string_view(buf_, static_cast<size_t>(n)));
      if (static_cast<size_t>(n) < want) return true;  // drained for now
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // EOF: every writer is gone; or an error
  }
}

void ControlReader::Park(Id id, Entry& entry) {
  if (!entry.warned) {
    entry.warned = true;
    spdlog::warn("{}heartbeat fd sends over {:.0f} KiB/s; read at that rate, its writes wait",
                 entry.name.empty() ? "" : entry.name + ": ", entry.budget.rate / 1024);
  }
  entry.parked = true;
  parked_.push_back(id);
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(unpark_.get()))) return;
  // Back when a read's worth of budget has grown.
  const double ms = static_cast<double>(sizeof buf_) * 1000 / entry.budget.rate;
  uv_timer_start(
      unpark_.get(), [](uv_timer_t* t) { static_cast<ControlReader*>(t->data)->Unpark(); },
      static_cast<uint64_t>(std::clamp(ms, 5.0, 1000.0)), 0);
}

void ControlReader::Unpark() {
  uv_timer_stop(unpark_.get());
  uv_update_time(loop_);
  std::vector<Id> parked;
  parked.swap(parked_);
  for (Id id : parked) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // gone meanwhile
    it->second.parked = false;
    if (!ReadAll(id, it->second)) Remove(it);  // parks it again when still over
  }
}

void ControlReader::Remove(std::map<Id, Entry>::iterator it) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  entries_.erase(it);
}

void ControlReader::DrainAndRemove(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  // Its last words whatever its budget, up to the most a pipe can hold:
  // its process has ended, though a child of it may still write.
  it->second.budget.bytes = std::max(it->second.budget.bytes, kMaxPipeBytes);
  it->second.parked = false;
  ReadAll(id, it->second);
  Remove(it);
}

}  // namespace ltd
