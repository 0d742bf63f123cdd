// A fork-join pool for the matrix work of one forward pass. The calling thread takes part,
// so a pool of n threads starts n - 1 workers. Workers spin briefly after a job (the next
// matmul follows within microseconds), then sleep on a futex-backed atomic wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tandem {

class thread_pool {
 public:
  // n_threads <= 0 means one per hardware thread.
  explicit thread_pool(int n_threads = 0);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return n_threads_; }

  // Runs task(i, thread_index) for every i in [0, n_tasks), spread over the threads, and
  // returns when all are done. Tasks are taken in increasing order from a shared counter.
  // Not reentrant: one parallel_for at a time, from one thread.
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& task);

  static int default_thread_count();

 private:
  void worker_loop(int thread_index);
  void run_tasks(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int)>* task_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<uint64_t> generation_{0};  // bumped to publish a job
  std::atomic<int> busy_workers_{0};     // workers still inside the current job
  std::atomic<int> sleepers_{0};         // workers blocked in generation_.wait
  std::atomic<bool> stopping_{false};
};

}  // namespace tandem
