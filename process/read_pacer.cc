#include "read_pacer.h"

#include <algorithm>
#include <cmath>

namespace ltd {

ReadPacer::ReadPacer(uv_loop_t* loop, double bytes_per_second, uv_alloc_cb alloc, uv_read_cb read)
    : loop_(loop), rate_(bytes_per_second), alloc_(alloc), read_(read) {
  prepare_ = UvInit<uv_prepare_t>([&](uv_prepare_t* p) { return uv_prepare_init(loop, p); });
  wake_ = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop, t); });
  for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(prepare_.get()),
                         reinterpret_cast<uv_handle_t*>(wake_.get())}) {
    if (h == nullptr) continue;
    h->data = this;
    uv_unref(h);  // no reason for the loop to run on
  }
}

std::shared_ptr<ReadPacer::Budget> ReadPacer::NewBudget() const {
  if (rate_ <= 0) return nullptr;
  return std::make_shared<Budget>(Budget::Full(rate_, uv_now(loop_)));
}

int ReadPacer::Start(Stream& s) {
  s.waiting = false;
  return uv_read_start(s.handle, alloc_, read_);
}

void ReadPacer::Took(Stream& s, size_t n, size_t len) {
  if (s.budget) s.budget->bytes -= static_cast<double>(n);
  if (n < len && (!s.budget || s.budget->bytes > 0)) return;  // empty pipe, budget left
  if (!prepare_ || !wake_) return;                            // reads on, as libuv would
  uv_read_stop(s.handle);
  s.waiting = true;
  waiting_.push_back(&s);
  uv_prepare_start(prepare_.get(), &ReadPacer::OnPrepare);
}

void ReadPacer::Forget(Stream& s) {
  if (s.waiting) std::erase(waiting_, &s);
  s.waiting = false;
}

void ReadPacer::OnPrepare(uv_prepare_t* prepare) {
  auto* self = static_cast<ReadPacer*>(prepare->data);
  const uint64_t now = uv_now(self->loop_);
  double soonest_ms = -1;
  // Those that may read again read; the rest stay, in place.
  std::erase_if(self->waiting_, [&](Stream* s) {
    if (s->budget) s->budget->Grow(now);
    if (!s->budget || s->budget->bytes > 0) {
      s->waiting = false;
      uv_read_start(s->handle, self->alloc_, self->read_);
      return true;
    }
    const double ms = std::ceil(-s->budget->bytes * 1000 / s->budget->rate) + 1;
    if (soonest_ms < 0 || ms < soonest_ms) soonest_ms = ms;
    return false;
  });
  if (self->waiting_.empty()) {
    uv_prepare_stop(prepare);
    uv_timer_stop(self->wake_.get());
    return;
  }
  // The prepare runs again at the next turn; the timer makes sure there is
  // one when nothing else would wake the loop.
  uv_timer_start(
      self->wake_.get(), [](uv_timer_t*) {}, static_cast<uint64_t>(soonest_ms), 0);
}

}  // namespace ltd
