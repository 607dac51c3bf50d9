// The metrics endpoint's HTTP side: GET /metrics answered from one thread
// that waits on every connection at once (poll), so that a connection
// held open costs a file descriptor, never a thread. A client that does
// not send its request whole within `request_timeout`, or does not read
// the answer within it, is closed; connections are bounded per client
// address and in all. At a bound the oldest connection of that address (or
// of all) is closed for the new one, so a client that holds connections
// open never shuts out the next scrape; it only loses its oldest.
//
// Why not prometheus-cpp's exposer (civetweb): it holds a worker thread
// per connection from accept to answer, so a few half-open requests
// (`GET /metrics HTTP/1.1` and no blank line) silenced it, and civetweb
// has no bound per client.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

struct HttpLimits {
  std::chrono::milliseconds request_timeout{5000};  // the request whole; the answer read
  size_t per_address = 8;                           // connections of one client address
  size_t total = 64;                                // connections in all
  size_t max_request = 8192;                        // bytes of a request's head
};

class MetricsHttp {
 public:
  // Listens on `listen` ("127.0.0.1:9464", "[::1]:9464", or "9464" for
  // every address; port 0 picks one) and answers GET /metrics with
  // `body()` (called on the server's thread). Fails with one line.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(const std::string& listen,
                                                            std::function<std::string()> body,
                                                            HttpLimits limits = {});
  ~MetricsHttp();  // the thread stops; every connection is closed
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  // "HOST:PORT" as served (the port picked for port 0).
  const std::string& address() const { return address_; }

 private:
  MetricsHttp(Fd listener, Fd wake_read, Fd wake_write, std::function<std::string()> body,
              HttpLimits limits, std::string address);
  void Run();

  Fd listener_, wake_read_, wake_write_;
  std::function<std::string()> body_;
  HttpLimits limits_;
  std::string address_;
  std::thread thread_;
};

// The answer to a request head `head` (through its blank line) for
// `body()`: 200 with the text for GET /metrics, 404 for another path, 405
// for another method. Apart from the server, so a test can call it alone.
std::string MetricsAnswer(std::string_view head, const std::function<std::string()>& body);

}  // namespace ltd
