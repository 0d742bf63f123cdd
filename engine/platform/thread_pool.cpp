#include "engine/platform/thread_pool.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <immintrin.h>
#include <pthread.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>

namespace tandem {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spin iterations before a worker sleeps: long enough to bridge consecutive matmuls.
constexpr int kSpinIterations = 20000;
constexpr int kSpinsPerYield = 256;

inline uint64_t pack(uint32_t begin, uint32_t end) { return begin | (static_cast<uint64_t>(end) << 32); }

}  // namespace

std::shared_ptr<thread_pool> shared_thread_pool(int n_threads) {
  const int n = n_threads > 0 ? n_threads : thread_pool::default_thread_count();
  // Made and looked up once per engine start, never on a step's path.
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<thread_pool>> pools;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = pools[n];
  auto pool = slot.lock();
  if (!pool) slot = pool = std::make_shared<thread_pool>(n);
  return pool;
}

int thread_pool::default_thread_count() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void thread_pool::lower_this_thread_priority(int nice) {
  if (nice <= 0) return;
  // Background work: SCHED_IDLE runs only on cores nothing else wants (a nice value alone
  // still takes its share of a core a step is waiting for); the nice value where that
  // policy is refused.
  const sched_param none{};
  if (sched_setscheduler(0, SCHED_IDLE, &none) != 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
}

thread_pool::thread_pool(int n_threads, int nice)
    : n_threads_(n_threads > 0 ? n_threads : default_thread_count()),
      nice_(nice),
      ranges_(static_cast<size_t>(n_threads_)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
  stopping_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

bool thread_pool::claim(int share, bool from_back, int64_t& task) {
  auto& r = ranges_[static_cast<size_t>(share)].packed;
  uint64_t cur = r.load(std::memory_order_relaxed);
  for (;;) {
    const auto begin = static_cast<uint32_t>(cur), end = static_cast<uint32_t>(cur >> 32);
    if (begin >= end) return false;
    const uint64_t rest = from_back ? pack(begin, end - 1) : pack(begin + 1, end);
    if (r.compare_exchange_weak(cur, rest, std::memory_order_relaxed)) {
      task = from_back ? end - 1 : begin;
      return true;
    }
  }
}

void thread_pool::run_tasks(int thread_index) {
  int64_t i;
  while (claim(thread_index, false, i)) (*task_)(i, thread_index);
  for (int k = 1; k < n_threads_; ++k) {
    const int victim = (thread_index + k) % n_threads_;
    while (claim(victim, true, i)) (*task_)(i, thread_index);
  }
}

void thread_pool::worker_loop(int thread_index) {
  // Named so profilers and the serving benchmark can tell model compute from the rest.
  pthread_setname_np(pthread_self(), nice_ > 0 ? "tandem-backgrnd" : "tandem-compute");
  lower_this_thread_priority(nice_);
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      // Yield now and then so an oversubscribed machine still makes progress.
      if (spin % kSpinsPerYield == kSpinsPerYield - 1) std::this_thread::yield();
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      // Announce the sleep, then re-check: parallel_for bumps the generation before it
      // reads sleepers_ (both seq_cst), so either it sees us or we see its job.
      sleepers_.fetch_add(1);
      while ((gen = generation_.load()) == seen) generation_.wait(seen);
      sleepers_.fetch_sub(1);
    }
    seen = gen;
    if (stopping_.load()) return;
    run_tasks(thread_index);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void thread_pool::parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& task) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1 || in_use_.exchange(true, std::memory_order_acquire)) {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
    return;
  }
  struct release {
    std::atomic<bool>& flag;
    ~release() { flag.store(false, std::memory_order_release); }
  } done{in_use_};
  if (n_tasks > UINT32_MAX) throw std::length_error("thread_pool: more than 2^32 tasks");
  task_ = &task;
  // Shares as equal as whole tasks allow; published by the generation bump below.
  for (int t = 0; t < n_threads_; ++t) {
    const auto begin = static_cast<uint32_t>(n_tasks * t / n_threads_);
    const auto end = static_cast<uint32_t>(n_tasks * (t + 1) / n_threads_);
    ranges_[static_cast<size_t>(t)].packed.store(pack(begin, end), std::memory_order_relaxed);
  }
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) generation_.notify_all();
  run_tasks(0);
  for (int spin = 1; busy_workers_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin % kSpinsPerYield == 0) std::this_thread::yield();
    cpu_relax();
  }
}

}  // namespace tandem
