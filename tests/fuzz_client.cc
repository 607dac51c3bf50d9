// lt_fuzz_client: random submits straight to ltd's gRPC API, for the
// security suite's randomized test (run as an unprivileged user):
//
//   lt_fuzz_client SOCKET MARKER WORKDIR SEED SECONDS
//
// Three submits in four are sane enough to run: a rank (/bin/sh) that
// copies a file of random bytes (with heartbeat-like lines mixed in) to
// fd 3, stdout and stderr, then exits with a random code; random bytes in
// its arguments, name, environment and, now and then, working directory;
// random small timeouts, grace and restarts. The fourth is anything at
// all in every field. MARKER (K=V) goes into every job's environment so
// the test can find what its ranks left. One line per submit on stdout:
// "accepted ID", "refused CODE" or "refused-without-message CODE".
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include "ltd.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: lt_fuzz_client SOCKET MARKER WORKDIR SEED SECONDS\n");
    return 2;
  }
  const std::string socket = argv[1], marker = argv[2], dir = argv[3];
  std::mt19937_64 rng(std::strtoull(argv[4], nullptr, 10));
  const int seconds = std::atoi(argv[5]);

  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  auto bytes = [&](size_t max) {
    std::string s(pick(max + 1), '\0');
    for (char& c : s) c = static_cast<char>(pick(256));
    return s;
  };
  auto payload = [&] {
    static const char* kLines[] = {"hb 7\n",
                                   "hb -1\n",
                                   "hb 99999999999999999999999\n",
                                   "timeout 1s\n",
                                   "timeout 0\n",
                                   "timeout -5s\n",
                                   "error boom \xe9\n",
                                   "exec_failed x\n",
                                   "hb\n",
                                   "\n"};
    std::string s;
    for (size_t i = pick(40); i > 0; --i) {
      if (pick(3) == 0) {
        s += kLines[pick(std::size(kLines))];
      } else {
        s += bytes(pick(8) == 0 ? 70000 : 200);
      }
    }
    return s;
  };

  auto api = ltd::v1::Ltd::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (int n = 0; std::chrono::steady_clock::now() < deadline; ++n) {
    ltd::v1::SubmitRequest req;
    req.set_detach(true);
    if (pick(4) != 0) {
      const std::string file = dir + "/payload-" + std::to_string(n);
      std::ofstream(file, std::ios::binary) << payload();
      req.set_devices(static_cast<int>(1 + pick(3)));
      req.add_argv("/bin/sh");
      req.add_argv("-c");
      req.add_argv("cat \"$1\" >&3; cat \"$1\"; cat \"$1\" >&2; exit " + std::to_string(pick(4)));
      req.add_argv(bytes(8));
      req.add_argv(file);
      req.set_cwd(pick(4) == 0 ? "/" + bytes(10) : dir);
      if (pick(2) != 0) req.set_name(bytes(pick(3) == 0 ? 300 : 12));
      req.set_heartbeat_timeout_ms(static_cast<int64_t>(pick(3) == 0 ? 1 + pick(2000) : 0));
      req.set_startup_timeout_ms(static_cast<int64_t>(pick(4) == 0 ? 1 + pick(2000) : 0));
      req.set_grace_ms(static_cast<int64_t>(pick(2000)));
      req.set_max_restarts(static_cast<int>(pick(3)));
    } else {
      req.set_devices(static_cast<int>(rng()));
      for (size_t i = pick(5); i > 0; --i) req.add_argv(bytes(100));
      req.set_cwd(bytes(50));
      req.set_name(bytes(50));
      req.set_heartbeat_timeout_ms(static_cast<int64_t>(rng()));
      req.set_startup_timeout_ms(static_cast<int64_t>(rng()));
      req.set_grace_ms(static_cast<int64_t>(rng()));
      req.set_max_restarts(static_cast<int>(rng()));
    }
    req.add_env(marker);
    for (size_t i = pick(6); i > 0; --i) req.add_env(bytes(60));
    for (size_t i = pick(4); i > 0; --i) req.add_extra_env("LT_FUZZ_" + bytes(6) + "=" + bytes(60));

    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = api->Submit(&ctx, req);
    ltd::v1::JobEvent ev;
    std::string id;
    while (reader->Read(&ev)) {
      if (ev.event_case() == ltd::v1::JobEvent::kAccepted) id = ev.accepted();
    }
    const grpc::Status s = reader->Finish();
    if (s.ok() && !id.empty()) {
      std::printf("accepted %s\n", id.c_str());
      // Variety, not volume: a few hundred jobs say as much as thousands,
      // and the test then reads every record back on two cores.
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    } else {
      std::printf("%s %d\n", s.error_message().empty() ? "refused-without-message" : "refused",
                  static_cast<int>(s.error_code()));
    }
    std::fflush(stdout);
  }
  return 0;
}
