#include "torchrun_launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bytes.h"
#include "etcd_client.h"
#include "str_util.h"

namespace ltd {
namespace {

// torch.cuda.device_count() as a launcher without torch can know it: the
// GPUs CUDA_VISIBLE_DEVICES names, else the driver's /dev/nvidiaN.
int CountGpus() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    int n = 0;
    for (std::string_view id : Split(visible, ',')) {
      if (id.empty() || id.starts_with("-")) break;  // CUDA stops at the first invalid one
      ++n;
    }
    return n;
  }
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        name.find_first_not_of("0123456789", 6) == std::string::npos) {
      ++n;
    }
  }
  return n;
}

// A directory path inside an output pattern: '%' is the pattern's.
std::string PatternQuoted(const std::string& path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

}  // namespace

MachineFacts ThisMachine() {
  MachineFacts facts;
  facts.gpus = CountGpus();
  facts.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  facts.plain_file = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) != 0;
  };
  if (const char* exec = std::getenv("PYTHON_EXEC"); exec != nullptr) facts.python_exec = exec;
  return facts;
}

absl::StatusOr<TorchrunLogs> TorchrunLogDirs(const LaunchArgs& opt) {
  TorchrunLogs logs{opt.output, opt.error, ""};
  if (!opt.redirects.Any() && !opt.tee.Any()) return logs;
  if (!opt.output.empty() || !opt.error.empty()) {
    return absl::InvalidArgumentError(
        "--output/--error and torchrun's --redirects/--tee both say where the ranks' output "
        "goes; give one");
  }
  std::string base = opt.log_dir;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = Cat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/torchelastic_XXXXXX");
    if (mkdtemp(base.data()) == nullptr) {
      return absl::InternalError(Cat("mkdtemp(", base, "): ", std::strerror(errno)));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  if (ec) return absl::InvalidArgumentError(Cat("--log-dir ", base, ": ", ec.message()));
  std::string run = opt.run_id.value_or("none");
  for (char& c : run) {
    if (c == '/' || c == '\0') c = '_';
  }
  std::string dir = Cat(base, "/", run, "_XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InvalidArgumentError(Cat("--log-dir ", base, ": ", std::strerror(errno)));
  }
  for (int r = 0; r < opt.devices; ++r) {
    std::filesystem::create_directories(Cat(dir, "/attempt_0/", r), ec);
    if (ec) return absl::InvalidArgumentError(Cat("--log-dir ", base, ": ", ec.message()));
  }
  logs.where = dir;
  logs.output = Cat(PatternQuoted(dir), "/attempt_0/%r/stdout.log");
  logs.error = Cat(PatternQuoted(dir), "/attempt_0/%r/stderr.log");
  return logs;
}

absl::StatusOr<std::unique_ptr<PrivateEtcd>> HostC10d(const LaunchArgs& opt,
                                                      const std::string& dir) {
  const size_t colon = opt.c10d_endpoint.rfind(':');
  std::string host = opt.c10d_endpoint.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  const int port = std::atoi(opt.c10d_endpoint.c_str() + colon + 1);
  std::string ip = LocalAddressOf(host);
  bool hosts = !ip.empty() && PortFree(ip, port);
  if (opt.c10d_is_host) {
    hosts = *opt.c10d_is_host;
    if (hosts && ip.empty()) {
      return absl::InvalidArgumentError(
          Cat("--rdzv-conf is_host=1, but ", DisplayEscape(host, Controls::kEscape),
              " is not an IPv4 address of this machine; give --rdzv-endpoint this node's"));
    }
  }
  if (!hosts) return nullptr;
  const std::string etcd = FindEtcd();
  if (etcd.empty()) {
    return absl::FailedPreconditionError(
        Cat("this node hosts the c10d rendezvous at ", opt.c10d_endpoint,
            ", which ltrun serves with etcd, and etcd is not installed here (apt-get install "
            "etcd-server); or run an etcd and give --rdzv-backend etcd"));
  }
  return PrivateEtcd::Start(etcd, ip, port, dir, std::chrono::seconds(15));
}

int C10dHostNode(const std::string& endpoint, const std::string& run_id,
                 const std::string& host_ip) {
  auto c = etcd::Client::Connect(endpoint, std::chrono::seconds(5));
  if (!c.ok()) return -1;
  (*c)->set_call_timeout(std::chrono::seconds(5));
  const std::string prefix = Cat("/ltd/runs/", run_id, "/nodes/");
  auto nodes = (*c)->GetPrefix(prefix);
  if (!nodes.ok()) return -1;
  for (const etcd::KeyValue& kv : nodes->kvs) {
    const nlohmann::json j = nlohmann::json::parse(kv.value, nullptr, false);
    if (!j.is_object() || !j.contains("host") || !j["host"].is_string()) continue;
    if (j["host"].get<std::string>() != host_ip) continue;
    const std::string rank = kv.key.substr(std::min(kv.key.size(), prefix.size()));
    if (rank.empty() || rank.size() > 6 ||
        rank.find_first_not_of("0123456789") != std::string::npos)
      continue;
    return std::stoi(rank);
  }
  return -1;
}

void C10dHostWatch::OnFenceNotice(std::string line) {
  const bool etcd_gone = line.starts_with("etcd at ") || line.starts_with("this node's etcd lease");
  runner_.OnFenceNotice(std::move(line));
  if (!etcd_gone || told_) return;
  told_ = true;
  RootCause cause;
  cause.node = host_node_;
  cause.reason = CauseReason::kSupervisorLost;
  cause.exit_code = 1;
  cause.at = std::chrono::system_clock::now();
  cause.message = Cat("node ", host_node_, ", which hosted the run's c10d rendezvous at ",
                      endpoint_, ", is gone: the rendezvous went with it");
  NodeReport gone;
  gone.node = host_node_;
  gone.kind = Evidence::kNodeGone;
  gone.cause = cause;
  const int attempt = attempt_();
  runner_.OnRunCause(attempt, cause);
  runner_.OnRunVerdict(attempt, gone, "", {gone});
}

}  // namespace ltd
