// One owner type for libuv handles: a handle lives on the heap from its
// init until libuv's close callback, which frees it. Destroying the owner
// closes the handle; nothing is freed while libuv may still touch it.
//
//   UvPtr<uv_poll_t> poll = UvInit<uv_poll_t>([&](uv_poll_t* h) {
//     return uv_poll_init(loop, h, fd);
//   });
#pragma once

#include <uv.h>

#include <memory>

namespace ltd {

struct UvCloser {
  template <typename T>
  void operator()(T* handle) const {
    uv_close(reinterpret_cast<uv_handle_t*>(handle),
             [](uv_handle_t* h) { delete reinterpret_cast<T*>(h); });
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
