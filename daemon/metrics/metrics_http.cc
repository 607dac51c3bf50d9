#include "metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <vector>

#include "posix_error.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  Fd fd;
  std::string peer;  // the client's address, without its port
  Clock::time_point deadline;
  std::string in;
  std::string out;  // the answer, once the request came whole
  size_t sent = 0;
};

absl::Status NotAnAddress(const std::string& listen) {
  return absl::InvalidArgumentError(
      Cat("--metrics-listen '", listen, "' is not an address; use e.g. 127.0.0.1:9464"));
}

// "HOST:PORT", "[V6]:PORT" or "PORT" into host (empty: every address) and port.
bool SplitListen(const std::string& listen, std::string& host, std::string& port) {
  if (listen.empty() || listen.find_first_of(" ,\t\n") != std::string::npos) return false;
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    host.clear();
    port = listen;
  } else {
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    } else if (host.find(':') != std::string::npos) {
      return false;  // a v6 address without its brackets
    }
  }
  return !port.empty() && port.find_first_not_of("0123456789") == std::string::npos &&
         port.size() <= 5;
}

std::string PeerHost(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  }
  return text;
}

int PortOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return 0;
}

std::string Answer(std::string_view status, std::string_view type, const std::string& body) {
  return Cat("HTTP/1.1 ", status, "\r\nContent-Type: ", type, "\r\nContent-Length: ", body.size(),
             "\r\nConnection: close\r\n\r\n", body);
}

size_t HeadEnd(const std::string& in) {
  size_t end = in.find("\r\n\r\n");
  if (end != std::string::npos) return end + 4;
  end = in.find("\n\n");
  return end == std::string::npos ? std::string::npos : end + 2;
}

}  // namespace

std::string MetricsAnswer(std::string_view head, const std::function<std::string()>& body) {
  const std::string_view line = head.substr(0, head.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos)
    return Answer("400 Bad Request", "text/plain", "bad request\n");
  const std::string_view method = line.substr(0, sp1);
  std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET") return Answer("405 Method Not Allowed", "text/plain", "GET only\n");
  if (path != "/metrics") return Answer("404 Not Found", "text/plain", "see /metrics\n");
  return Answer("200 OK", "text/plain; version=0.0.4; charset=utf-8", body());
}

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& listen,
                                                                std::function<std::string()> body,
                                                                HttpLimits limits) {
  std::string host, port;
  if (!SplitListen(listen, host, port)) return NotAnAddress(listen);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return NotAnAddress(listen);
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  Fd listener(socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return PosixError("socket", listen, errno);
  const int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listener.get(), found->ai_addr, found->ai_addrlen) != 0 ||
      ::listen(listener.get(), 64) != 0) {
    return absl::UnavailableError(Cat("cannot serve metrics on ", listen, " (", strerror(errno),
                                      "); choose another --metrics-listen"));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return PosixError("getsockname", listen, errno);
  }
  const std::string shown = host.empty()                          ? "0.0.0.0"
                            : host.find(':') != std::string::npos ? Cat("[", host, "]")
                                                                  : host;
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return PosixError("pipe2", listen, errno);
  return std::unique_ptr<MetricsHttp>(new MetricsHttp(std::move(listener), Fd(wake[0]), Fd(wake[1]),
                                                      std::move(body), limits,
                                                      Cat(shown, ":", PortOf(bound))));
}

MetricsHttp::MetricsHttp(Fd listener, Fd wake_read, Fd wake_write,
                         std::function<std::string()> body, HttpLimits limits, std::string address)
    : listener_(std::move(listener)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      body_(std::move(body)),
      limits_(limits),
      address_(std::move(address)),
      thread_([this] { Run(); }) {}

MetricsHttp::~MetricsHttp() {
  const char c = 0;
  (void)!write(wake_write_.get(), &c, 1);
  thread_.join();
}

void MetricsHttp::Run() {
  std::list<Conn> conns;  // oldest first
  std::vector<pollfd> fds;
  std::vector<std::list<Conn>::iterator> polled;
  for (;;) {
    const Clock::time_point now = Clock::now();
    // Past its deadline: the request did not come whole, or the answer
    // was not read, in time.
    conns.remove_if([&](const Conn& c) { return c.deadline <= now; });
    int timeout = -1;
    if (!conns.empty()) {
      const auto first = std::min_element(conns.begin(), conns.end(),
                                          [](auto& a, auto& b) { return a.deadline < b.deadline; });
      timeout = static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(first->deadline - now).count());
    }
    fds.assign({{wake_read_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}});
    polled.clear();
    for (auto it = conns.begin(); it != conns.end(); ++it) {
      fds.push_back({it->fd.get(), static_cast<short>(it->out.empty() ? POLLIN : POLLOUT), 0});
      polled.push_back(it);
    }
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("metrics: poll: {}; the endpoint stops", strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    for (size_t i = 0; i < polled.size(); ++i) {
      const short ev = fds[i + 2].revents;
      if (ev == 0) continue;
      Conn& c = *polled[i];
      bool done = (ev & (POLLERR | POLLNVAL)) != 0;
      if (!done && c.out.empty()) {
        char buf[4096];
        const ssize_t n = recv(c.fd.get(), buf, sizeof buf, 0);
        if (n <= 0) {
          done = n == 0 || (errno != EAGAIN && errno != EINTR);
        } else {
          c.in.append(buf, static_cast<size_t>(n));
          const size_t end = HeadEnd(c.in);
          if (end != std::string::npos) {
            c.out = MetricsAnswer(std::string_view(c.in).substr(0, end), body_);
            c.deadline = Clock::now() + limits_.request_timeout;
          } else if (c.in.size() > limits_.max_request) {
            c.out = Answer("431 Request Header Fields Too Large", "text/plain", "too large\n");
          }
        }
      } else if (!done) {
        const ssize_t n =
            send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0) {
          done = errno != EAGAIN && errno != EINTR;
        } else {
          c.sent += static_cast<size_t>(n);
          done = c.sent == c.out.size();
        }
      }
      if (done) conns.erase(polled[i]);
    }
    if ((fds[1].revents & POLLIN) == 0) continue;
    for (;;) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      Fd fd(accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) break;  // EAGAIN, or out of fds: the next poll tries again
      Conn c{std::move(fd), PeerHost(peer), Clock::now() + limits_.request_timeout, {}, {}, 0};
      // At a bound, the oldest connection of the address (or of all) goes.
      const auto same = [&](const Conn& o) { return o.peer == c.peer; };
      if (static_cast<size_t>(std::count_if(conns.begin(), conns.end(), same)) >=
          limits_.per_address) {
        conns.erase(std::find_if(conns.begin(), conns.end(), same));
      }
      if (conns.size() >= limits_.total) conns.pop_front();
      conns.push_back(std::move(c));
    }
  }
}

}  // namespace ltd
