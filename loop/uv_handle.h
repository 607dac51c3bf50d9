// One owner type for libuv handles: a handle lives on the heap from its
// init until libuv's close callback, which frees it. Destroying the owner
// closes the handle; nothing is freed while libuv may still touch it.
//
//   UvPtr<uv_poll_t> poll = UvInit<uv_poll_t>([&](uv_poll_t* h) {
//     return uv_poll_init(loop, h, fd);
//   });
//
// uv_close stops the handle (reads, polls, timers, signals): after it no
// callback of the handle runs but the close callback, which touches only
// the handle. So whatever `data` points to may be freed as soon as the
// owner is reset, even from inside one of the handle's own callbacks.
// (Requests still pending on a stream, such as writes, are cancelled and
// called back later: they must carry their own data.) This is the only
// place that calls uv_close.
#pragma once

#include <uv.h>

#include <memory>

namespace ltd {

struct UvCloser {
  template <typename T>
  void operator()(T* handle) const {
    auto* h = reinterpret_cast<uv_handle_t*>(handle);
    // Nothing may reach the owner through the handle from here on.
    h->data = nullptr;
    uv_close(h, [](uv_handle_t* closed) { delete reinterpret_cast<T*>(closed); });
  }
};

template <typename T>
using UvPtr = std::unique_ptr<T, UvCloser>;

// Allocates a handle and runs `init` on it (uv_*_init); null when init
// fails, in which case libuv never saw the handle and it is simply freed.
template <typename T, typename Init>
UvPtr<T> UvInit(Init&& init) {
  auto* handle = new T{};
  if (init(handle) != 0) {
    delete handle;
    return nullptr;
  }
  return UvPtr<T>(handle);
}

}  // namespace ltd
