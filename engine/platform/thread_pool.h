// A fork-join pool for the matrix work of one forward pass. The calling thread takes part,
// so a pool of n threads starts n - 1 workers. Workers spin briefly after a job (the next
// matmul follows within microseconds), then sleep on a futex-backed atomic wait.
//
// Task order: thread t first runs its own contiguous share of the tasks in increasing order,
// then steals from the far end of the others' shares until none is left:
//
//   tasks   0 1 2 3 4 5 6 7 | 8 9 10 11 12 13 14 15
//           thread 0 ->     | thread 1 ->      <- thread 0 steals here if it finishes first
//
// A matmul's tasks are consecutive row ranges, so each thread reads one stream of weights
// that the hardware prefetcher follows from task to task. Taking tasks from a shared counter
// interleaved the threads (thread 0 ran tasks 0, 2, 4, ...), restarting the prefetcher at
// every task: steps of 1 and 2 tokens took 15% and 28% longer, of 9 tokens 7% (paired runs,
// docs/cpu_engine.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace tandem {

class thread_pool {
 public:
  // n_threads <= 0 means one per hardware thread. nice > 0: the workers run at that lower
  // scheduling priority (background work, such as the image encoder beside the device
  // worker: the kernel gives the cores to the step first).
  explicit thread_pool(int n_threads = 0, int nice = 0);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return n_threads_; }

  // Runs task(i, thread_index) for every i in [0, n_tasks), spread over the threads as
  // described above, and returns when all are done. One job at a time: a caller that finds
  // the pool running another's job (a drafter beside the device worker, two models of one
  // process) runs its tasks on its own thread, as thread 0, instead of waiting, so the
  // process never runs more than size() + its callers' threads.
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& task);

  static int default_thread_count();
  // Lowers the calling thread's scheduling priority to `nice` (Linux: per thread); a
  // failure is ignored (the work still runs, only at the normal priority).
  static void lower_this_thread_priority(int nice);

 private:
  void worker_loop(int thread_index);
  void run_tasks(int thread_index);

  // One thread's share of the current job: tasks [begin, end), packed as begin | end << 32
  // so that the owner (from the front) and thieves (from the back) claim with one CAS.
  struct alignas(64) task_range {
    std::atomic<uint64_t> packed{0};
  };
  // Takes the first (owner) or last (thief) unclaimed task of `share`; false when none is left.
  bool claim(int share, bool from_back, int64_t& task);

  int n_threads_;
  int nice_ = 0;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int)>* task_ = nullptr;
  std::vector<task_range> ranges_;       // [n_threads_]
  std::atomic<uint64_t> generation_{0};  // bumped to publish a job
  std::atomic<int> busy_workers_{0};     // workers still inside the current job
  std::atomic<int> sleepers_{0};         // workers blocked in generation_.wait
  std::atomic<bool> stopping_{false};
  std::atomic<bool> in_use_{false};  // a job is running (its caller owns ranges_ and task_)
};

// The process's pool of n_threads (<= 0: one per hardware thread), made on first use and
// shared by every model engine and drafter that asks for that size while one holds it.
std::shared_ptr<thread_pool> shared_thread_pool(int n_threads = 0);

}  // namespace tandem
