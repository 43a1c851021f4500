#include "process_group.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "ringlet/error.h"
#include "store_adapter.h"

namespace ringlet::torch_backend {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error("ringlet: " + message);
}

std::optional<DataType> ringletType(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return DataType::kFloat32;
    case at::kDouble:
      return DataType::kFloat64;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBFloat16;
    case at::kChar:
      return DataType::kInt8;
    case at::kByte:
      return DataType::kUInt8;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    default:
      return std::nullopt;
  }
}

// The name Python users know a type by: "torch.int16".
std::string dtypeName(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kHalf:
      return "torch.float16";
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kChar:
      return "torch.int8";
    case at::kByte:
      return "torch.uint8";
    case at::kShort:
      return "torch.int16";
    case at::kInt:
      return "torch.int32";
    case at::kLong:
      return "torch.int64";
    case at::kBool:
      return "torch.bool";
    case at::kComplexFloat:
      return "torch.complex64";
    case at::kComplexDouble:
      return "torch.complex128";
    default:
      return c10::toString(type);
  }
}

void checkTensor(const at::Tensor& t, const char* op) {
  if (!t.defined()) fail(fmt::format("{}: a tensor is undefined", op));
  if (!t.device().is_cpu()) {
    fail(fmt::format("{}: a tensor is on {}; this build of ringlet_torch takes CPU tensors", op,
                     t.device().str()));
  }
  if (t.layout() != at::kStrided) {
    fail(fmt::format("{}: sparse tensors are not supported (layout {})", op, c10::str(t.layout())));
  }
}

// The only tensor of a single-tensor list (ringlet drives one device per process).
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) {
    fail(fmt::format("{}: expects a list of one tensor, got {}", op, tensors.size()));
  }
  checkTensor(tensors[0], op);
  return tensors[0];
}

DataType reducibleType(const at::Tensor& t, const char* op) {
  auto type = ringletType(t.scalar_type());
  if (!type) {
    fail(
        fmt::format("{}: cannot reduce {} tensors (ringlet reduces float32, float64, float16, "
                    "bfloat16, int8, uint8, int32 and int64)",
                    op, dtypeName(t.scalar_type())));
  }
  return *type;
}

ReduceOp reduceOpFor(const c10d::ReduceOp& op, const at::Tensor& t, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::kSum;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::kProd;
    case c10d::ReduceOp::MIN:
      return ReduceOp::kMin;
    case c10d::ReduceOp::MAX:
      return ReduceOp::kMax;
    case c10d::ReduceOp::AVG:
      if (!t.is_floating_point()) {
        fail(fmt::format("{}: ReduceOp.AVG needs a floating-point tensor, not {}", name,
                         dtypeName(t.scalar_type())));
      }
      return ReduceOp::kAvg;
    default:
      break;
  }
  static constexpr const char* kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                           "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
  const auto index = static_cast<size_t>(op.op_);
  fail(fmt::format("{}: ReduceOp.{} is not supported (ringlet has SUM, AVG, PRODUCT, MIN, MAX)",
                   name, index < std::size(kNames) ? kNames[index] : "?"));
}

// What moves for a tensor in an operation that does not reduce: its elements when ringlet knows
// the type (so ranks that disagree on it get a MismatchError), else its bytes.
struct Elements {
  DataType type;
  size_t count;
};
// Elements of `t` per tensor element: 1, or its size in bytes when it moves as bytes.
size_t unitOf(const at::Tensor& t) { return ringletType(t.scalar_type()) ? 1 : t.element_size(); }
Elements elementsOf(const at::Tensor& t) {
  if (auto type = ringletType(t.scalar_type())) return {*type, static_cast<size_t>(t.numel())};
  return {DataType::kUInt8, t.nbytes()};
}

void checkSameType(const at::Tensor& a, const at::Tensor& b, const char* op) {
  if (a.scalar_type() != b.scalar_type()) {
    fail(fmt::format("{}: tensors of different types ({} and {})", op, dtypeName(a.scalar_type()),
                     dtypeName(b.scalar_type())));
  }
}

// A tensor ringlet writes: itself when contiguous, else a contiguous stand-in that is copied
// back once the operation is done.
struct Output {
  at::Tensor user;
  at::Tensor buffer;
  void* data() const { return buffer.data_ptr(); }
  void copyBack() const {
    if (!buffer.is_same(user)) user.copy_(buffer);
  }
};
Output output(const at::Tensor& t, bool keepContents) {
  if (t.is_contiguous()) return {t, t};
  return {t, keepContents ? t.contiguous() : at::empty_like(t, at::MemoryFormat::Contiguous)};
}

// The tensors of a list when each is contiguous and they lie back to back in one storage, in
// list order (views of one buffer: `out.chunk(n)`, `list(out.unbind(0))`): one 1-D view over
// them all, which a collective reads or writes in place of a packed copy. Undefined otherwise
// (and for a list with an empty tensor, whose data pointer says nothing).
at::Tensor adjacentView(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return {};
  const at::Tensor& first = tensors[0];
  const auto* base = static_cast<const std::byte*>(first.data_ptr());
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (!t.is_contiguous() || t.numel() == 0 || t.scalar_type() != first.scalar_type() ||
        !t.storage().is_alias_of(first.storage()) ||
        static_cast<const std::byte*>(t.data_ptr()) != base + total * first.element_size()) {
      return {};
    }
    total += t.numel();
  }
  return first.as_strided({total}, {1}, first.storage_offset());
}

// Whether the bytes of `a` and `b` (each contiguous) share any.
bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.numel() == 0 || b.numel() == 0) return false;
  const auto* x = static_cast<const std::byte*>(a.data_ptr());
  const auto* y = static_cast<const std::byte*>(b.data_ptr());
  return x < y + b.nbytes() && y < x + a.nbytes();
}

// Copies consecutive pieces of `flat` into `tensors` (sizes from the tensors).
void unpack(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    const int64_t n = t.numel();
    t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

std::vector<size_t> numels(const std::vector<at::Tensor>& tensors) {
  std::vector<size_t> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(static_cast<size_t>(t.numel()));
  return out;
}

bool allEqual(const std::vector<size_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

}  // namespace

// ---- Work -------------------------------------------------------------------------------------

RingletWork::RingletWork(int rank, c10d::OpType type, const char* title,
                         std::vector<at::Tensor> outputs, Body body,
                         std::weak_ptr<Executor> executor)
    : c10d::Work(rank, type, title),
      title_(title),
      outputs_(std::move(outputs)),
      body_(std::move(body)),
      executor_(std::move(executor)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

bool RingletWork::wait(std::chrono::milliseconds timeout) {
  // Gone once the group shut down: every Work it queued has completed by then.
  if (auto executor = executor_.lock()) executor->runUntil(this);
  return c10d::Work::wait(timeout);
}

void RingletWork::run() {
  // Titles read "ringlet:all_reduce" (for the profiler); messages name the operation only.
  const std::string_view op =
      std::string_view(title_).substr(std::string_view(title_).find(':') + 1);
  std::exception_ptr error;
  try {
    body_();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(
        std::runtime_error(fmt::format("ringlet: {} failed on rank {}: {}", op, rank_, e.what())));
  } catch (...) {
    error = std::make_exception_ptr(std::runtime_error(
        fmt::format("ringlet: {} failed on rank {} (unknown error)", op, rank_)));
  }
  body_ = nullptr;  // drops the buffers the operation held
  complete(error);
}

int RingletWork::sourceRank() const {
  const int source = source_.load(std::memory_order_relaxed);
  if (source < 0) return c10d::Work::sourceRank();  // throws: not a recv, or not done
  return source;
}

void RingletWork::cancel(std::exception_ptr error) {
  body_ = nullptr;
  complete(std::move(error));
}

void RingletWork::complete(std::exception_ptr error) {
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

// ---- Executor ---------------------------------------------------------------------------------

Executor::Executor() : thread_([this] { loop(); }) {}

Executor::~Executor() { shutdown(); }

void Executor::enqueue(c10::intrusive_ptr<RingletWork> work) {
  {
    std::lock_guard lock(mu_);
    if (!stop_) {
      lastQueued_ = Clock::now();
      queue_.push_back({std::move(work), lastQueued_});
      if (!lazy_) cv_.notify_one();
      return;
    }
  }
  work->cancel(
      std::make_exception_ptr(std::runtime_error("ringlet: the process group was shut down")));
}

c10::intrusive_ptr<RingletWork> Executor::takeLocked() {
  if (running_ != nullptr || queue_.empty()) return {};
  auto next = std::move(queue_.front().work);
  queue_.pop_front();
  running_ = next.get();
  return next;
}

void Executor::finishedLocked() {
  running_ = nullptr;
  if (!queue_.empty()) cv_.notify_all();  // the group's thread waits for a Work to take
}

void Executor::ranOnWaiterLocked(bool waiter) {
  byWaiters_ = (byWaiters_ << 1 | (waiter ? 1 : 0)) & 0xffff;
  const bool was = lazy_;
  lazy_ = waiter && std::popcount(byWaiters_) >= kLazyOf;
  if (lazy_ && !was) cv_.notify_all();  // the group's thread waits untimed: now it must look
}

void Executor::runUntil(const RingletWork* work) {
  std::unique_lock lock(mu_);
  while (!const_cast<RingletWork*>(work)->isCompleted()) {
    auto next = takeLocked();
    if (!next) return;  // another thread runs one; `work` runs there or on the group's thread
    ranOnWaiterLocked(true);
    lock.unlock();
    next->run();
    next.reset();
    lock.lock();
    finishedLocked();
  }
}

void Executor::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    const auto ready = [&] { return (stop_ && queue_.empty()) || (!running_ && !queue_.empty()); };
    if (!lazy_) {
      cv_.wait(lock, [&] { return ready() || lazy_; });
      if (lazy_) continue;
    } else if (!cv_.wait_for(lock, kLazyPoll, ready)) {
      if (queue_.empty() && Clock::now() - lastQueued_ > kLazyQuiet) lazy_ = false;
      continue;
    }
    if (lazy_ && !stop_ && !running_ && !queue_.empty() &&
        Clock::now() < queue_.front().at + kLazyGrace) {
      cv_.wait_until(lock, queue_.front().at + kLazyGrace);  // its caller may wait for it yet
      continue;
    }
    auto next = takeLocked();
    if (!next) {
      if (stop_ && queue_.empty()) return;
      continue;
    }
    ranOnWaiterLocked(false);
    lock.unlock();
    next->run();
    next.reset();
    lock.lock();
    finishedLocked();
  }
}

void Executor::shutdown() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // not reached while Works hold the executor weakly; never terminate()
  } else {
    thread_.join();
  }
}

// ---- ProcessGroupRinglet ----------------------------------------------------------------------

namespace {
// Every group alive, for shutdownAll(). Raw pointers: a weak reference would hold a group's
// destructor back (c10's intrusive_ptr runs it only once the weak references are gone too), and
// with it the shutdown that ends its pending Works. Never destroyed: used from an exit handler.
struct LiveGroups {
  std::mutex mu;
  std::vector<ProcessGroupRinglet*> groups;
};
LiveGroups& liveGroups() {
  static auto* live = new LiveGroups();
  return *live;
}
}  // namespace

void ProcessGroupRinglet::shutdownAll() {
  // Under the lock, so that no group's destructor runs meanwhile (it removes the group first).
  LiveGroups& live = liveGroups();
  std::lock_guard lock(live.mu);
  for (ProcessGroupRinglet* group : live.groups) group->shutdown();
}

ProcessGroupRinglet::ProcessGroupRinglet(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size, std::chrono::milliseconds timeout,
                                         const std::string& groupName,
                                         const std::string& storeDescription)
    : GroupBase(rank, size), timeout_(timeout) {
  if (timeout.count() <= 0)
    fail(fmt::format("timeout must be positive, got {} ms", timeout.count()));
  Bootstrap bootstrap;
  bootstrap.rank = rank;
  bootstrap.size = size;
  bootstrap.store = adaptC10dStore(store, timeout, storeDescription);
  bootstrap.jobId = "torch/" + groupName;
  bootstrap.source = "torch";
  CommunicatorOptions options = CommunicatorOptions::fromEnvironment();
  options.timeout = timeout;
  try {
    comm_ = std::make_unique<Communicator>(Communicator::create(bootstrap, options));
    up_.comm = std::make_unique<Communicator>(comm_->dup());
    down_.comm = std::make_unique<Communicator>(comm_->dup());
  } catch (const std::exception& e) {
    fail(fmt::format("setting up process group '{}' (rank {} of {}) failed: {}", groupName, rank,
                     size, e.what()));
  }
  executor_ = std::make_shared<Executor>();
  up_.executor = std::make_shared<Executor>();
  down_.executor = std::make_shared<Executor>();
  anySource_ = std::make_shared<Executor>();
  init();
  LiveGroups& live = liveGroups();
  std::lock_guard lock(live.mu);
  live.groups.push_back(this);
}

ProcessGroupRinglet::~ProcessGroupRinglet() {
  {
    LiveGroups& live = liveGroups();
    std::lock_guard lock(live.mu);
    std::erase(live.groups, this);
  }
  // The queue's thread may be running a future's Python callback, which needs the GIL.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    shutdown();
  } else {
    shutdown();
  }
}

void ProcessGroupRinglet::shutdown() {
  // The any-source Works first: they queue their looks on the two point-to-point executors, and
  // one that nobody answers would hold the shutdown until the group's timeout: it stops.
  anySourceStop_->store(true);
  for (auto* e : {&anySource_, &executor_, &up_.executor, &down_.executor}) {
    if (*e) (*e)->shutdown();
  }
}

std::string ProcessGroupRinglet::describeLinks() const { return comm_->describeLinks(); }

std::string ProcessGroupRinglet::algorithmFor(const std::string& collective, size_t bytes) const {
  return comm_->algorithmFor(collective, bytes);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::enqueue(c10d::OpType type, const char* title,
                                                            std::vector<at::Tensor> outputs,
                                                            std::chrono::milliseconds timeout,
                                                            RingletWork::Body body) {
  // c10d's kUnsetTimeout (-1 ms), or none at all: the group's timeout. Else the collective's
  // waits end by `timeout` (as ProcessGroupGloo honours it), and the next call has the group's
  // again. The executor runs one body at a time, so no other call sees it.
  if (timeout.count() > 0) {
    Communicator* comm = comm_.get();
    body = [comm, timeout, inner = std::move(body)] {
      struct Restore {
        Communicator* comm;
        ~Restore() { comm->setCallTimeout(std::chrono::milliseconds(0)); }
      } restore{comm};
      comm->setCallTimeout(timeout);
      inner();
    };
  }
  return enqueue(type, title, std::move(outputs), std::move(body), executor_);
}

c10::intrusive_ptr<RingletWork> ProcessGroupRinglet::enqueue(
    c10d::OpType type, const char* title, std::vector<at::Tensor> outputs, RingletWork::Body body,
    const std::shared_ptr<Executor>& executor) {
  auto work = c10::make_intrusive<RingletWork>(rank_, type, title, std::move(outputs),
                                               std::move(body), executor);
  executor->enqueue(work);
  return work;
}

at::Tensor ProcessGroupRinglet::PackBuffers::get(Which which, int64_t numel, at::ScalarType dtype) {
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  at::Tensor& buffer = bytes_[which];
  if (!buffer.defined() || buffer.numel() < bytes) {
    buffer = at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte));
  }
  return buffer.narrow(0, 0, bytes).view(dtype);
}

at::Tensor ProcessGroupRinglet::PackBuffers::pack(Which which,
                                                  const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  at::Tensor flat = get(which, total, tensors.at(0).scalar_type());
  int64_t offset = 0;
  for (const auto& t : tensors) {
    flat.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
    offset += t.numel();
  }
  return flat;
}

int ProcessGroupRinglet::checkRoot(int64_t root, const char* op) const {
  if (root < 0 || root >= size_) {
    fail(fmt::format("{}: root rank {} is out of range for a group of {}", op, root, size_));
  }
  return static_cast<int>(root);
}

int ProcessGroupRinglet::checkPeer(int peer, const char* op) const {
  if (peer < 0 || peer >= size_) {
    fail(fmt::format("{}: peer rank {} is out of range for a group of {}", op, peer, size_));
  }
  if (peer == rank_) fail(fmt::format("{}: rank {} cannot {} itself", op, peer, op));
  return peer;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  constexpr const char* kOp = "allreduce";
  const at::Tensor& t = single(tensors, kOp);
  const DataType type = reducibleType(t, kOp);
  const ReduceOp op = reduceOpFor(opts.reduceOp, t, kOp);
  Output out = output(t, true);
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::ALLREDUCE, "ringlet:all_reduce", {t}, opts.timeout, [=] {
    comm->allreduce(out.data(), out.data(), out.buffer.numel(), type, op);
    out.copyBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  constexpr const char* kOp = "allreduce_coalesced";
  if (tensors.empty()) fail(fmt::format("{}: the list of tensors is empty", kOp));
  for (const auto& t : tensors) {
    checkTensor(t, kOp);
    checkSameType(t, tensors[0], kOp);
  }
  const DataType type = reducibleType(tensors[0], kOp);
  const ReduceOp op = reduceOpFor(opts.reduceOp, tensors[0], kOp);
  // Views of one buffer (a DDP-style flat bucket) are reduced where they lie.
  const at::Tensor view = adjacentView(tensors);
  const bool direct = view.defined();
  Communicator* comm = comm_.get();
  auto packed = packed_;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "ringlet:all_reduce_coalesced", tensors,
                 opts.timeout, [=] {
                   const at::Tensor flat =
                       direct ? view : packed->pack(PackBuffers::kInput, tensors);
                   comm->allreduce(flat.data_ptr(), flat.data_ptr(), flat.numel(), type, op);
                   if (!direct) unpack(flat, tensors);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& opts) {
  constexpr const char* kOp = "broadcast";
  const at::Tensor& t = single(tensors, kOp);
  const int root = checkRoot(opts.rootRank, kOp);
  const Elements e = elementsOf(t);
  Output out = output(t, rank_ == root);
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::BROADCAST, "ringlet:broadcast", {t}, opts.timeout, [=] {
    comm->broadcast(out.data(), e.count, e.type, root);
    out.copyBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::reduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::ReduceOptions& opts) {
  constexpr const char* kOp = "reduce";
  const at::Tensor& t = single(tensors, kOp);
  const int root = checkRoot(opts.rootRank, kOp);
  const DataType type = reducibleType(t, kOp);
  const ReduceOp op = reduceOpFor(opts.reduceOp, t, kOp);
  Output out = output(t, true);
  Communicator* comm = comm_.get();
  const bool isRoot = rank_ == root;
  return enqueue(c10d::OpType::REDUCE, "ringlet:reduce", {t}, opts.timeout, [=] {
    comm->reduce(out.data(), isRoot ? out.data() : nullptr, out.buffer.numel(), type, op, root);
    if (isRoot) out.copyBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kOp = "allgather";
  const at::Tensor& in = single(inputs, kOp);
  if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_) {
    fail(fmt::format("{}: expects one list of {} output tensors", kOp, size_));
  }
  const std::vector<at::Tensor>& outs = outputs[0];
  for (const auto& t : outs) {
    checkTensor(t, kOp);
    checkSameType(t, in, kOp);
  }
  if (outs[rank_].numel() != in.numel()) {
    fail(fmt::format("{}: the input has {} elements but this rank's output tensor has {}", kOp,
                     in.numel(), outs[rank_].numel()));
  }
  const at::Tensor send = in.contiguous();
  const Elements e = elementsOf(send);
  std::vector<size_t> counts = numels(outs);
  const int64_t total =
      static_cast<int64_t>(std::accumulate(counts.begin(), counts.end(), size_t{0}));
  for (auto& c : counts) c *= unitOf(in);
  const bool even = allEqual(counts);
  // Outputs that are views of one buffer are gathered into it (the input may be this rank's
  // own output: in place); else into a packed buffer, then copied out.
  at::Tensor view = adjacentView(outs);
  if (overlaps(send, view) && send.data_ptr() != outs[rank_].data_ptr()) view = at::Tensor();
  const bool direct = view.defined();
  Communicator* comm = comm_.get();
  auto packed = packed_;
  const at::ScalarType dtype = in.scalar_type();
  return enqueue(c10d::OpType::ALLGATHER, "ringlet:all_gather", outs, opts.timeout, [=] {
    const at::Tensor flat = direct ? view : packed->get(PackBuffers::kOutput, total, dtype);
    if (even) {
      comm->allgather(send.data_ptr(), flat.data_ptr(), e.count, e.type);
    } else {
      comm->allgatherv(send.data_ptr(), flat.data_ptr(), counts, e.type);
    }
    if (!direct) unpack(flat, outs);
  });
}

namespace {

// One all-gather into a tensor of the group's size times the input, checked (the base form's and
// each pair of the coalesced form's).
struct GatherInto {
  at::Tensor send;
  Elements e;
  Output out;
  void run(Communicator& comm) const {
    comm.allgather(send.data_ptr(), out.data(), e.count, e.type);
    out.copyBack();
  }
};
GatherInto gatherInto(const at::Tensor& result, const at::Tensor& input, int size, const char* op) {
  checkTensor(result, op);
  checkTensor(input, op);
  checkSameType(result, input, op);
  if (result.numel() != input.numel() * size) {
    fail(fmt::format("{}: the output has {} elements; {} ranks of {} need {}", op, result.numel(),
                     size, input.numel(), input.numel() * size));
  }
  at::Tensor send = input.contiguous();
  const Elements e = elementsOf(send);
  return {std::move(send), e, output(result, false)};
}

// One reduce-scatter of an input of the group's size times the output, checked.
struct ScatterFrom {
  at::Tensor send;
  DataType type;
  ReduceOp op;
  Output out;
  void run(Communicator& comm) const {
    comm.reduceScatter(send.data_ptr(), out.data(), out.buffer.numel(), type, op);
    out.copyBack();
  }
};
ScatterFrom scatterFrom(const at::Tensor& result, const at::Tensor& input,
                        const c10d::ReduceOp& reduceOp, int size, const char* op) {
  checkTensor(result, op);
  checkTensor(input, op);
  checkSameType(result, input, op);
  if (input.numel() != result.numel() * size) {
    fail(fmt::format("{}: the input has {} elements; {} ranks of {} need {}", op, input.numel(),
                     size, result.numel(), result.numel() * size));
  }
  const DataType type = reducibleType(input, op);
  const ReduceOp rop = reduceOpFor(reduceOp, input, op);
  return {input.contiguous(), type, rop, output(result, false)};
}

// A coalesced form's pairs, each checked by `check(output, input)` before anything is sent.
template <typename Check>
auto checkedPairs(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const char* op,
                  Check check) {
  if (outputs.size() != inputs.size()) {
    fail(fmt::format("{}: {} outputs for {} inputs", op, outputs.size(), inputs.size()));
  }
  std::vector<decltype(check(outputs[0], inputs[0]))> calls;
  calls.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) calls.push_back(check(outputs[i], inputs[i]));
  return calls;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::_allgather_base(
    at::Tensor& output_, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  GatherInto g = gatherInto(output_, input, size_, "_allgather_base");
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "ringlet:_all_gather_base", {output_}, opts.timeout,
                 [=] { g.run(*comm); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kOp = "allgather_coalesced";
  if (outputLists.size() != inputs.size()) {
    fail(fmt::format("{}: {} output lists for {} inputs", kOp, outputLists.size(), inputs.size()));
  }
  std::vector<at::Tensor> sends;
  std::vector<at::Tensor> flats;
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], kOp);
    if (static_cast<int>(outputLists[i].size()) != size_) {
      fail(fmt::format("{}: output list {} has {} tensors; the group has {} ranks", kOp, i,
                       outputLists[i].size(), size_));
    }
    for (const auto& t : outputLists[i]) {
      checkTensor(t, kOp);
      checkSameType(t, inputs[i], kOp);
      if (t.numel() != inputs[i].numel()) {
        fail(
            fmt::format("{}: output tensors of list {} must have {} elements like the input, "
                        "one has {}",
                        kOp, i, inputs[i].numel(), t.numel()));
      }
      all.push_back(t);
    }
    sends.push_back(inputs[i].contiguous());
  }
  Communicator* comm = comm_.get();
  auto lists = outputLists;
  auto packed = packed_;
  const int n = size_;
  return enqueue(
      c10d::OpType::ALLGATHER_COALESCED, "ringlet:all_gather_coalesced", all, opts.timeout, [=] {
        for (size_t i = 0; i < sends.size(); ++i) {
          const Elements e = elementsOf(sends[i]);
          const at::Tensor flat =
              packed->get(PackBuffers::kOutput, sends[i].numel() * n, sends[i].scalar_type());
          comm->allgather(sends[i].data_ptr(), flat.data_ptr(), e.count, e.type);
          unpack(flat, lists[i]);
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  constexpr const char* kOp = "gather";
  const at::Tensor& in = single(inputs, kOp);
  const int root = checkRoot(opts.rootRank, kOp);
  const bool isRoot = rank_ == root;
  std::vector<at::Tensor> outs;
  if (isRoot) {
    if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != size_) {
      fail(fmt::format("{}: the root expects one list of {} output tensors", kOp, size_));
    }
    outs = outputs[0];
    for (const auto& t : outs) {
      checkTensor(t, kOp);
      checkSameType(t, in, kOp);
      if (t.numel() != in.numel()) {
        fail(fmt::format("{}: output tensors must have {} elements like the input, one has {}", kOp,
                         in.numel(), t.numel()));
      }
    }
  } else if (!outputs.empty() && !outputs[0].empty()) {
    fail(fmt::format("{}: only the root (rank {}) takes output tensors", kOp, root));
  }
  const at::Tensor send = in.contiguous();
  const Elements e = elementsOf(send);
  at::Tensor view = isRoot ? adjacentView(outs) : at::Tensor();
  if (overlaps(send, view) && send.data_ptr() != outs[rank_].data_ptr()) view = at::Tensor();
  const bool direct = view.defined();
  Communicator* comm = comm_.get();
  auto packed = packed_;
  const int64_t total = in.numel() * size_;
  const at::ScalarType dtype = in.scalar_type();
  return enqueue(c10d::OpType::GATHER, "ringlet:gather", outs, opts.timeout, [=] {
    const at::Tensor flat =
        direct ? view : (isRoot ? packed->get(PackBuffers::kOutput, total, dtype) : at::Tensor());
    comm->gather(send.data_ptr(), isRoot ? flat.data_ptr() : nullptr, e.count, e.type, root);
    if (isRoot && !direct) unpack(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  constexpr const char* kOp = "scatter";
  const at::Tensor& outT = single(outputs, kOp);
  const int root = checkRoot(opts.rootRank, kOp);
  const bool isRoot = rank_ == root;
  at::Tensor view;
  std::vector<at::Tensor> pieces;
  if (isRoot) {
    if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_) {
      fail(fmt::format("{}: the root expects one list of {} input tensors", kOp, size_));
    }
    for (const auto& t : inputs[0]) {
      checkTensor(t, kOp);
      checkSameType(t, outT, kOp);
      if (t.numel() != outT.numel()) {
        fail(fmt::format("{}: input tensors must have {} elements like the output, one has {}", kOp,
                         outT.numel(), t.numel()));
      }
    }
    // Views of one buffer are sent from where they lie (the output may be the root's own block);
    // else from a packed copy.
    view = adjacentView(inputs[0]);
    if (overlaps(outT, view) && outT.data_ptr() != inputs[0][rank_].data_ptr()) {
      view = at::Tensor();
    }
    pieces = inputs[0];
  } else if (!inputs.empty() && !inputs[0].empty()) {
    fail(fmt::format("{}: only the root (rank {}) takes input tensors", kOp, root));
  }
  Output out = output(outT, false);
  const Elements e = elementsOf(out.buffer);
  Communicator* comm = comm_.get();
  auto packed = packed_;
  return enqueue(c10d::OpType::SCATTER, "ringlet:scatter", {outT}, opts.timeout, [=] {
    at::Tensor flat = view;
    if (isRoot && !flat.defined()) flat = packed->pack(PackBuffers::kInput, pieces);
    comm->scatter(isRoot ? flat.data_ptr() : nullptr, out.data(), e.count, e.type, root);
    out.copyBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr const char* kOp = "reduce_scatter";
  const at::Tensor& outT = single(outputs, kOp);
  if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_) {
    fail(fmt::format("{}: expects one list of {} input tensors", kOp, size_));
  }
  for (const auto& t : inputs[0]) {
    checkTensor(t, kOp);
    checkSameType(t, outT, kOp);
  }
  if (inputs[0][rank_].numel() != outT.numel()) {
    fail(fmt::format("{}: the output has {} elements but this rank's input tensor has {}", kOp,
                     outT.numel(), inputs[0][rank_].numel()));
  }
  const DataType type = reducibleType(outT, kOp);
  const ReduceOp op = reduceOpFor(opts.reduceOp, outT, kOp);
  const std::vector<size_t> counts = numels(inputs[0]);
  const bool even = allEqual(counts);
  // Inputs that are views of one buffer are reduced from it (the output may be this rank's own
  // input: in place); else from a packed copy.
  at::Tensor view = adjacentView(inputs[0]);
  if (overlaps(outT, view) && outT.data_ptr() != inputs[0][rank_].data_ptr()) view = at::Tensor();
  Output out = output(outT, false);
  Communicator* comm = comm_.get();
  auto packed = packed_;
  const std::vector<at::Tensor> pieces = inputs[0];
  return enqueue(c10d::OpType::REDUCE_SCATTER, "ringlet:reduce_scatter", {outT}, opts.timeout, [=] {
    const at::Tensor flat = view.defined() ? view : packed->pack(PackBuffers::kInput, pieces);
    if (even) {
      comm->reduceScatter(flat.data_ptr(), out.data(), out.buffer.numel(), type, op);
    } else {
      comm->reduceScatterv(flat.data_ptr(), out.data(), counts, type, op);
    }
    out.copyBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::_reduce_scatter_base(
    at::Tensor& output_, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  ScatterFrom r = scatterFrom(output_, input, opts.reduceOp, size_, "_reduce_scatter_base");
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "ringlet:_reduce_scatter_base", {output_},
                 opts.timeout, [=] { r.run(*comm); });
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kOp = "allgather_into_tensor_coalesced";
  const auto calls = checkedPairs(outputs, inputs, kOp, [&](const auto& out, const auto& in) {
    return gatherInto(out, in, size_, kOp);
  });
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::COALESCED, "ringlet:all_gather_into_tensor_coalesced", outputs,
                 opts.timeout, [=] {
                   for (const GatherInto& g : calls) g.run(*comm);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr const char* kOp = "reduce_scatter_tensor_coalesced";
  const auto calls = checkedPairs(outputs, inputs, kOp, [&](const auto& out, const auto& in) {
    return scatterFrom(out, in, opts.reduceOp, size_, kOp);
  });
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::COALESCED, "ringlet:reduce_scatter_tensor_coalesced", outputs,
                 opts.timeout, [=] {
                   for (const ScatterFrom& r : calls) r.run(*comm);
                 });
}
#endif

namespace {

// Element counts per rank of an all-to-all's tensor split along dimension 0 (`splits` rows per
// rank, or equal parts when empty).
std::vector<size_t> splitCounts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                const char* op, const char* which) {
  std::vector<size_t> counts(size);
  if (splits.empty()) {
    if (t.numel() % size != 0) {
      fail(fmt::format("{}: the {} has {} elements, which do not split evenly over {} ranks", op,
                       which, t.numel(), size));
    }
    std::fill(counts.begin(), counts.end(), static_cast<size_t>(t.numel() / size));
    return counts;
  }
  if (static_cast<int>(splits.size()) != size) {
    fail(fmt::format("{}: {} split sizes for the {}; the group has {} ranks", op, splits.size(),
                     which, size));
  }
  if (t.dim() == 0) fail(fmt::format("{}: the {} is a scalar and cannot be split", op, which));
  const int64_t rows = t.size(0);
  const int64_t rowElements = rows == 0 ? 0 : t.numel() / rows;
  int64_t total = 0;
  for (int q = 0; q < size; ++q) {
    if (splits[q] < 0) fail(fmt::format("{}: split size {} of the {} is negative", op, q, which));
    total += splits[q];
    counts[q] = static_cast<size_t>(splits[q] * rowElements);
  }
  if (total != rows) {
    fail(fmt::format("{}: the {} split sizes add up to {} but its first dimension is {}", op, which,
                     total, rows));
  }
  return counts;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::alltoall_base(
    at::Tensor& output_, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions& opts) {
  constexpr const char* kOp = "alltoall_base";
  checkTensor(output_, kOp);
  checkTensor(input, kOp);
  checkSameType(output_, input, kOp);
  std::vector<size_t> sendCounts = splitCounts(input, inputSplitSizes, size_, kOp, "input");
  std::vector<size_t> recvCounts = splitCounts(output_, outputSplitSizes, size_, kOp, "output");
  const at::Tensor send = input.contiguous();
  Output out = output(output_, false);
  // Types ringlet does not know move as bytes.
  const Elements e = elementsOf(send);
  for (auto& c : sendCounts) c *= unitOf(send);
  for (auto& c : recvCounts) c *= unitOf(send);
  const bool even = inputSplitSizes.empty() && outputSplitSizes.empty() && sendCounts == recvCounts;
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::ALLTOALL_BASE, "ringlet:all_to_all", {output_}, opts.timeout, [=] {
    if (even) {
      comm->allToAll(send.data_ptr(), out.data(), sendCounts[0], e.type);
    } else {
      comm->allToAllv(send.data_ptr(), sendCounts, out.data(), recvCounts, e.type);
    }
    out.copyBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllToAllOptions& opts) {
  constexpr const char* kOp = "alltoall";
  if (static_cast<int>(outputs.size()) != size_ || static_cast<int>(inputs.size()) != size_) {
    fail(fmt::format("{}: expects {} input and {} output tensors, got {} and {}", kOp, size_, size_,
                     inputs.size(), outputs.size()));
  }
  for (int q = 0; q < size_; ++q) {
    checkTensor(inputs[q], kOp);
    checkTensor(outputs[q], kOp);
    checkSameType(inputs[q], inputs[0], kOp);
    checkSameType(outputs[q], inputs[0], kOp);
  }
  const at::Tensor sendView = adjacentView(inputs);
  const Elements e = elementsOf(inputs[0]);
  const size_t scale = unitOf(inputs[0]);
  std::vector<size_t> sendCounts = numels(inputs);
  std::vector<size_t> recvCounts = numels(outputs);
  int64_t recvTotal = 0;
  for (auto c : recvCounts) recvTotal += static_cast<int64_t>(c);
  for (auto& c : sendCounts) c *= scale;
  for (auto& c : recvCounts) c *= scale;
  // Outputs that are views of one buffer, apart from the inputs, are received into it.
  at::Tensor view = adjacentView(outputs);
  for (const auto& t : inputs) {
    if (overlaps(view, t)) view = at::Tensor();
  }
  const bool direct = view.defined();
  Communicator* comm = comm_.get();
  auto packed = packed_;
  const at::ScalarType dtype = inputs[0].scalar_type();
  return enqueue(c10d::OpType::ALLTOALL, "ringlet:all_to_all", outputs, opts.timeout, [=] {
    const at::Tensor sendFlat =
        sendView.defined() ? sendView : packed->pack(PackBuffers::kInput, inputs);
    const at::Tensor recvFlat = direct ? view : packed->get(PackBuffers::kOutput, recvTotal, dtype);
    comm->allToAllv(sendFlat.data_ptr(), sendCounts, recvFlat.data_ptr(), recvCounts, e.type);
    if (!direct) unpack(recvFlat, outputs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::send(std::vector<at::Tensor>& tensors,
                                                         int dstRank, int tag) {
  constexpr const char* kOp = "send";
  const at::Tensor& t = single(tensors, kOp);
  const int peer = checkPeer(dstRank, kOp);
  const at::Tensor data = t.contiguous();
  const Elements e = elementsOf(data);
  PointToPoint& p2p = direction(rank_, peer);
  Communicator* comm = p2p.comm.get();
  return enqueue(
      c10d::OpType::SEND, "ringlet:send", {t},
      [=] { comm->send(data.data_ptr(), e.count, e.type, peer, tag); }, p2p.executor);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::recv(std::vector<at::Tensor>& tensors,
                                                         int srcRank, int tag) {
  constexpr const char* kOp = "recv";
  const at::Tensor& t = single(tensors, kOp);
  const int peer = checkPeer(srcRank, kOp);
  Output out = output(t, false);
  const Elements e = elementsOf(out.buffer);
  PointToPoint& p2p = direction(peer, rank_);
  Communicator* comm = p2p.comm.get();
  auto work = enqueue(
      c10d::OpType::RECV, "ringlet:recv", {t},
      [=] {
        comm->recv(out.data(), e.count, e.type, peer, tag);
        out.copyBack();
      },
      p2p.executor);
  work->setSource(peer);  // before the caller can wait on it
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                  int tag) {
  constexpr const char* kOp = "recv";
  const at::Tensor& t = single(tensors, kOp);
  if (size_ == 1) fail("recv from any source in a group of one rank would never get a message");
  Output out = output(t, false);
  const Elements e = elementsOf(out.buffer);
  // The directions that can bring a message: lower ranks send on `up`, higher ones on `down`.
  std::vector<PointToPoint*> directions;
  if (rank_ > 0) directions.push_back(&up_);
  if (rank_ < size_ - 1) directions.push_back(&down_);
  auto work =
      c10::make_intrusive<RingletWork>(rank_, c10d::OpType::RECVANYSOURCE, "ringlet:recv_anysource",
                                       std::vector<at::Tensor>{t}, nullptr, anySource_);
  RingletWork* self = work.get();  // the body runs inside the Work, which the executor holds
  const auto timeout = timeout_;
  auto stop = anySourceStop_;
  // Where one direction alone can bring the message (the lowest rank, the highest, every group of
  // two), each look waits on it up to a turn, and the message wakes it (tryRecv's `within`: the
  // core sleeps on the links); else each looks once and the rounds sleep 20 us doubling to
  // 0.25 ms. Either way the shutdown is seen between looks.
  const auto turn = std::chrono::microseconds(directions.size() == 1 ? 10000 : 0);
  auto body = [=, this] {
    // Looks at the directions in turn until the group's timeout (as a recv from one rank waits).
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto sleep = std::chrono::microseconds(20);
    for (;;) {
      for (PointToPoint* p2p : directions) {
        std::optional<int> found;
        std::exception_ptr error;  // the look's own, rethrown as it came
        Communicator* comm = p2p->comm.get();
        auto look = enqueue(
            c10d::OpType::RECVANYSOURCE, "ringlet:recv_anysource", {},
            [&] {
              try {
                found = comm->tryRecv(out.data(), e.count, e.type, kAnySource, tag,
                                      std::min<std::chrono::microseconds>(turn, timeout));
              } catch (...) {
                error = std::current_exception();
              }
            },
            p2p->executor);
        look->wait();  // throws only when the group shut down before the look ran
        if (error) std::rethrow_exception(error);
        if (found) {
          out.copyBack();
          self->setSource(*found);
          return;
        }
      }
      if (stop->load()) throw std::runtime_error("the process group was shut down");
      if (std::chrono::steady_clock::now() >= deadline) {
        throw TimeoutError(fmt::format(
            "recv from any source: no message with tag {} ({} elements of {}) came within {} ms",
            tag, e.count, toString(e.type), timeout.count()));
      }
      if (turn.count() > 0) continue;  // the look waited
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(250));
    }
  };
  work->setBody(std::move(body));
  anySource_->enqueue(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRinglet::barrier(const c10d::BarrierOptions& opts) {
  Communicator* comm = comm_.get();
  return enqueue(c10d::OpType::BARRIER, "ringlet:barrier", {}, opts.timeout,
                 [=] { comm->barrier(); });
}

}  // namespace ringlet::torch_backend
