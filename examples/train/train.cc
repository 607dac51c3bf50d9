// examples/train: a data-parallel trainer in the shape of a PyTorch DDP job,
// written against LibTorch's C++ API and c10d so that ltd can be exercised
// with a real multi-rank job (real rendezvous, real collectives, real
// blocking when a peer dies or hangs) without Python.
//
// Every rank trains the same MLP on its own synthetic batches; after each
// backward pass the gradients are averaged with one allreduce, which keeps
// the replicas bit-identical, and the rank sends `hb STEP` to ltd.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef LTD_TRAIN_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <ltworker/ltworker.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "config.h"

// The fault injectors live outside any namespace, never inlined, so that a
// stack dump of a stuck or dying rank names them plainly.

// Blocks forever without heartbeats: what a rank stuck in a deadlock or a
// wedged kernel looks like from outside. The other ranks then block inside
// their next allreduce, waiting for this one.
[[noreturn, gnu::noinline]] void injected_hang(int rank, int64_t step) {
  std::fprintf(stderr, "rank %d: injected hang at step %lld, heartbeats stop\n", rank,
               static_cast<long long>(step));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

[[noreturn, gnu::noinline]] void injected_crash(int rank, int64_t step, bool by_signal) {
  std::string what = "injected crash at step " + std::to_string(step);
  std::fprintf(stderr, "rank %d: %s%s\n", rank, what.c_str(), by_signal ? ", abort()" : "");
  std::fflush(stdout);
  std::fflush(stderr);
  // A signal death tells the supervisor nothing, like a real segfault.
  if (by_signal) std::abort();
  lt_report_error(what.c_str());
  // _Exit, not exit: static destructors would race the process group's
  // worker threads, and a real crash does not run them either.
  std::_Exit(train::kInjectedCrashExitCode);
}

namespace train {
namespace {

constexpr int64_t kInputs = 16;
constexpr int64_t kTeacherHidden = 8;

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t inputs, int64_t hidden)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, 1))) {}

  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }

  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Mlp);

// The function to learn: a fixed random two-layer net, the same on every
// rank because it is drawn right after seeding with the shared seed.
struct Teacher {
  torch::Tensor w1, w2;
  torch::Tensor operator()(const torch::Tensor& x) const { return torch::tanh(x.mm(w1)).mm(w2); }
};

// c10::Error::what() appends a backtrace of LibTorch's internals: noise in a
// root cause that ltd shows on one line.
std::string Message(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

bool IsLoopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// gloo's default device resolves the machine's hostname, which in a
// container or an offline sandbox may name an interface that is down. A
// single-host job (MASTER_ADDR on loopback, as ltd sets it) only needs lo.
std::shared_ptr<gloo::transport::Device> MakeGlooDevice(const RankEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (IsLoopback(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

torch::Device PickDevice([[maybe_unused]] const RankEnv& env) {
#ifdef LTD_TRAIN_WITH_NCCL
  // CUDA_VISIBLE_DEVICES is the same list for every rank (docs/protocol.md), so a
  // rank takes its slot by LOCAL_RANK.
  if (torch::cuda::is_available()) {
    return torch::Device(
        torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank % torch::cuda::device_count()));
  }
#endif
  return torch::kCPU;
}

c10::intrusive_ptr<c10d::ProcessGroup> MakeProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, const RankEnv& env, const torch::Device& device,
    std::chrono::milliseconds timeout) {
#ifdef LTD_TRAIN_WITH_NCCL
  if (device.is_cuda()) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
  }
#endif
  TORCH_CHECK(device.is_cpu(), "no process group for device ", device);
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(MakeGlooDevice(env));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
}

// Starts a collective and waits for it. wait() rethrows a peer's failure
// (connection closed) or the process group timeout (a hung peer) as an
// exception; `what` names the collective in it, so that the root cause reads
// "allreduce of gradients at step 5 failed: ... Connection closed by peer".
template <typename Start>
void Collective(const std::string& what, Start start) {
  try {
    start()->wait();
  } catch (const std::exception& e) {
    throw std::runtime_error(what + " failed: " + Message(e));
  }
}

void Allreduce(c10d::ProcessGroup& pg, at::Tensor& flat, c10d::ReduceOp op,
               const std::string& what) {
  std::vector<at::Tensor> tensors{flat};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  Collective(what, [&] { return pg.allreduce(tensors, options); });
}

at::Tensor Flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(tensors.size());
  for (const auto& t : tensors) pieces.push_back(t.detach().reshape({-1}));
  return torch::cat(pieces);
}

// What DDP does at construction: every replica starts from rank 0's weights,
// whatever each rank's own initialisation produced.
void BroadcastParameters(c10d::ProcessGroup& pg, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> tensors{Flatten(params)};
  Collective("broadcast of rank 0's initial parameters", [&] { return pg.broadcast(tensors); });
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& p : params) {
    p.copy_(tensors[0].narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

// Averages all gradients with a single allreduce on one flat buffer (one
// collective per step instead of one per tensor) and, riding along in its
// last element, the loss, so every rank learns the global mean loss for free.
double AverageGradients(c10d::ProcessGroup& pg, const std::vector<at::Tensor>& params,
                        const at::Tensor& loss, int world_size, int64_t step) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(params.size() + 1);
  for (const auto& p : params) pieces.push_back(p.grad());
  pieces.push_back(loss.detach());
  at::Tensor flat = Flatten(pieces);
  Allreduce(pg, flat, c10d::ReduceOp::SUM,
            "allreduce of gradients at step " + std::to_string(step));
  flat.div_(world_size);
  int64_t offset = 0;
  for (const auto& p : params) {
    p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
  return flat[offset].item<double>();
}

// Largest difference of any parameter between any two ranks: one MAX
// allreduce over [p, -p] yields max(p) and -min(p) together. 0 means the
// replicas are identical, as averaged gradients guarantee.
double ParameterSpread(c10d::ProcessGroup& pg, const std::vector<at::Tensor>& params) {
  at::Tensor flat = Flatten(params);
  at::Tensor both = torch::cat({flat, -flat});
  Allreduce(pg, both, c10d::ReduceOp::MAX, "final parameter check");
  int64_t n = flat.numel();
  return (both.narrow(0, 0, n) + both.narrow(0, n, n)).max().item<double>();
}

int Run(const Options& o, const RankEnv& env) {
  const auto timeout = std::chrono::milliseconds(o.pg_timeout_s * 1000);
  const torch::Device device = PickDevice(env);

  c10d::TCPStoreOptions store_options;
  store_options.port = env.master_port;
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = env.world_size;
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    pg = MakeProcessGroup(store, env, device, timeout);
  } catch (const std::exception& e) {
    // c10d's own messages ("Socket Timeout") do not say what was attempted.
    throw std::runtime_error("rendezvous of " + std::to_string(env.world_size) + " ranks at " +
                             env.master_addr + ":" + std::to_string(env.master_port) +
                             " failed: " + Message(e));
  }
  // First heartbeat once the rendezvous is through: a startup timeout then
  // covers a rank that never reaches its peers.
  lt_heartbeat();
  if (env.rank == 0) {
    std::printf("rank 0: %d ranks on %s, %s backend, %lld steps of %lld samples per rank\n",
                env.world_size, device.str().c_str(), pg->getBackendName().c_str(),
                static_cast<long long>(o.steps), static_cast<long long>(o.batch));
    std::fflush(stdout);
  }

  torch::manual_seed(o.seed);
  // Scaled so tanh stays off its flat tails and the function is learnable.
  Teacher teacher{(torch::randn({kInputs, kTeacherHidden}) / std::sqrt(double{kInputs})).to(device),
                  torch::randn({kTeacherHidden, 1}).to(device)};
  Mlp model(kInputs, o.hidden);
  model->to(device);
  std::vector<at::Tensor> params = model->parameters();
  BroadcastParameters(*pg, params);
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(o.lr));

  // Each rank draws its own data, as a DistributedSampler shard would be.
  torch::manual_seed(o.seed + 1 + static_cast<uint64_t>(env.rank));

  double loss = 0;
  auto start = std::chrono::steady_clock::now();
  auto window_start = start;  // rank 0's progress lines time the steps since the last line
  int64_t window_end_step = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    if (env.rank == o.crash_rank && step == o.crash_step) {
      injected_crash(env.rank, step, o.crash_signal);
    }
    if (env.rank == o.hang_rank && step == o.hang_step) injected_hang(env.rank, step);

    torch::Tensor x = torch::randn({o.batch, kInputs}).to(device);
    torch::Tensor y = teacher(x);
    optimizer.zero_grad();
    torch::Tensor local_loss = torch::nn::functional::mse_loss(model->forward(x), y);
    local_loss.backward();
    if (o.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.step_ms));
    loss = AverageGradients(*pg, params, local_loss, env.world_size, step);
    // Every rank sees the same mean loss, so all of them stop here together.
    if (!std::isfinite(loss)) {
      throw std::runtime_error("loss is " + std::to_string(loss) + " at step " +
                               std::to_string(step) + "; try a smaller --lr");
    }
    optimizer.step();
    lt_heartbeat_step(step);

    if (env.rank == 0 && (step == 1 || step % o.print_every == 0 || step == o.steps)) {
      auto now = std::chrono::steady_clock::now();
      double ms = std::chrono::duration<double, std::milli>(now - window_start).count();
      std::printf("rank 0: step %lld/%lld loss %.6f (%.2f ms/step)\n", static_cast<long long>(step),
                  static_cast<long long>(o.steps), loss,
                  ms / static_cast<double>(step - window_end_step));
      std::fflush(stdout);
      window_start = now;
      window_end_step = step;
    }
  }
  double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  double spread = ParameterSpread(*pg, params);
  if (!(spread == 0)) {  // also catches NaN
    throw std::runtime_error("parameters differ across ranks after training (max difference " +
                             std::to_string(spread) + ")");
  }
  std::printf("rank %d: done, steps=%lld, final loss=%.6f, params in sync (%.2f ms/step)\n",
              env.rank, static_cast<long long>(o.steps), loss,
              total_ms / static_cast<double>(o.steps));
  std::fflush(stdout);
  return 0;
}

// `who` is "rank N", or "train" before the rank is known.
int Fail(const std::string& who, const std::string& what) {
  std::fprintf(stderr, "%s: error: %s\n", who.c_str(), what.c_str());
  std::fflush(stderr);
  lt_report_error(what.c_str());
  return 1;
}

}  // namespace
}  // namespace train

int main(int argc, char** argv) {
  // A peer that dies mid-collective must surface as an exception from
  // wait(), not kill this rank with SIGPIPE and blur the root cause (Python,
  // the usual host of a rank, ignores SIGPIPE for the same reason).
  std::signal(SIGPIPE, SIG_IGN);

  train::ParseResult parsed = train::ParseOptions(argc, argv);
  if (!parsed.options) return parsed.exit_code;
  std::string error;
  std::optional<train::RankEnv> env = train::ReadRankEnv(&error);
  if (!env) return train::Fail("train", error);
  if (auto usage = train::CheckAgainstEnv(*parsed.options, *env)) {
    std::fprintf(stderr, "train: %s\n", usage->c_str());
    return 2;
  }
  try {
    return train::Run(*parsed.options, *env);
  } catch (const std::exception& e) {
    return train::Fail("rank " + std::to_string(env->rank), train::Message(e));
  }
}
