#include "actors/batch_queue.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "engine/batch/batch_store.h"

namespace tandem {
namespace {
namespace json = boost::json;
using batch::batch_record;
using batch::batch_status;
using batch::file_record;

constexpr auto kTickEvery = std::chrono::seconds(1);
constexpr int64_t kWindowSeconds = 24 * 3600;  // completion_window "24h"

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "<prefix><14 hex digits of a microsecond clock, increasing><10 random hex digits>": ids sort
// in the order they were made (lists page by id), and cannot be guessed. Called on the
// queue's thread only.
std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  thread_local uint64_t last = 0;
  static constexpr char kHex[] = "0123456789abcdef";
  const auto us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  last = std::max(last + 1, us);
  std::string s(prefix);
  for (int shift = 52; shift >= 0; shift -= 4) s += kHex[(last >> shift) & 15];
  for (int i = 0; i < 10; ++i) s += kHex[rng() & 15];
  return s;
}

batch_reply ok(const json::value& v) { return batch_reply{200, json::serialize(v), {}, {}, {}}; }

batch_reply error(int status, std::string message, std::string param = {}, std::string code = {}) {
  return batch_reply{status, {}, std::move(message), std::move(param), std::move(code)};
}

// A batch that is running: its input's lines, where the queue stands, its two result files.
struct running_batch {
  std::vector<batch::line_span> lines;
  size_t next = 0;                // the next line not yet taken
  std::deque<uint64_t> ready;     // refused lines due again
  std::vector<uint64_t> waiting;  // refused lines, due at the next tick
  uint32_t in_flight = 0;
  batch::result_log out;  // status 200 answers
  batch::result_log err;  // other answers and lines that cannot run
  // Set: no new line starts; once none is in flight the batch ends in this status.
  std::optional<batch_status> stop_as;
  bool answered(const std::string& custom_id) const {
    return out.answered().contains(custom_id) || err.answered().contains(custom_id);
  }
};

struct batch_queue_state {
  static inline const char* name = "tandem.batch_queue";
  batch_limits limits;
  batch_runner runner;
  std::unique_ptr<batch::batch_store> store;
  std::string unusable;  // why the directory cannot be used ("" = it can)
  std::map<std::string, file_record> files;
  std::map<std::string, batch_record> batches;
  std::map<std::string, running_batch> running;
  std::vector<std::string> order;  // running batches, oldest first (round-robin)
  size_t turn = 0;
  uint32_t in_flight = 0;
  // The bytes of each tenant's files (uploads, and the outputs of its finished batches):
  // uploads and new batches are refused at --batch-max-tenant-bytes until files are deleted.
  std::unordered_map<std::string, uint64_t> tenant_bytes;

  void save(const batch_record& b) { store->save_batch(b); }

  // validating -> in_progress: index the input, open the result files (a restart: what they
  // already hold counts, and those lines are skipped), join the round-robin.
  void start(batch_record& b) {
    const auto f = files.find(b.input_file_id);
    std::string content = f == files.end() ? std::string() : store->read_content(b.input_file_id);
    if (content.empty()) {
      b.status = batch_status::failed;
      b.failed_at = now_s();
      b.errors.push_back({"invalid_file", "the input file is gone", "input_file_id", -1});
      save(b);
      return;
    }
    running_batch r;
    r.lines = batch::index_lines(content);
    content = {};
    r.out = batch::result_log(store->content_path(b.output_file_id));
    r.err = batch::result_log(store->content_path(b.error_file_id));
    b.counts.total = r.lines.size();
    b.counts.completed = r.out.lines();
    b.counts.failed = r.err.lines();
    if (b.status == batch_status::validating) {
      b.status = batch_status::in_progress;
      b.in_progress_at = now_s();
    }
    if (b.status == batch_status::cancelling) r.stop_as = batch_status::cancelled;
    save(b);
    running.emplace(b.id, std::move(r));
    order.push_back(b.id);
  }

  // The output and error files get their records; the batch its final status.
  void finish(batch_record& b, running_batch& r, batch_status final_status) {
    const int64_t t = now_s();
    if (final_status == batch_status::completed) {
      b.status = batch_status::finalizing;
      b.finalizing_at = t;
      save(b);
    }
    auto publish = [&](const std::string& id, const batch::result_log& log, const char* what) {
      if (log.lines() == 0) return;
      file_record f{id, b.tenant, b.id + "_" + what + ".jsonl", "batch_output", log.bytes(), t};
      store->put_file_record(f);
      if (!files.contains(id)) tenant_bytes[b.tenant] += f.bytes;  // a resumed finish may redo this
      files[id] = std::move(f);
    };
    publish(b.output_file_id, r.out, "output");
    publish(b.error_file_id, r.err, "error");
    b.status = final_status;
    (final_status == batch_status::completed   ? b.completed_at
     : final_status == batch_status::cancelled ? b.cancelled_at
                                               : b.expired_at) = t;
    save(b);
    const std::string id = b.id;
    running.erase(id);
    order.erase(std::remove(order.begin(), order.end(), id), order.end());
  }

  // Ends the batch when nothing of it is left to run or in flight.
  void finish_if_done(batch_record& b, running_batch& r) {
    if (r.in_flight > 0) return;
    if (r.stop_as) {
      finish(b, r, *r.stop_as);
    } else if (r.next >= r.lines.size() && r.ready.empty() && r.waiting.empty()) {
      finish(b, r, batch_status::completed);
    }
  }

  // The next runnable line of `b`, or none; lines that cannot run go to the error file here.
  std::optional<std::pair<uint64_t, batch::input_line>> take(batch_record& b, running_batch& r) {
    while (!r.stop_as) {
      uint64_t i;
      if (!r.ready.empty()) {
        i = r.ready.front();
        r.ready.pop_front();
      } else if (r.next < r.lines.size()) {
        i = r.next++;
      } else {
        return std::nullopt;
      }
      batch::input_line line = batch::read_input_line(store->read_line(b.input_file_id, r.lines[i]), b.endpoint);
      if (line.custom_id.empty() || r.answered(line.custom_id)) continue;
      if (!line.error_code.empty()) {
        r.err.append(batch::error_line(random_id("batch_req_"), line.custom_id, line.error_code, line.error_message),
                     line.custom_id);
        ++b.counts.failed;
        continue;
      }
      return std::make_pair(i, std::move(line));
    }
    return std::nullopt;
  }
};

using queue_pointer = batch_queue_actor::stateful_pointer<batch_queue_state>;

// Starts lines until max_in_flight run, taking one line from each running batch in turn.
void pump(queue_pointer self) {
  auto& st = self->state;
  size_t idle = 0;  // batches in a row that had nothing to start
  while (st.in_flight < st.limits.max_in_flight && !st.order.empty() && idle < st.order.size()) {
    st.turn %= st.order.size();
    const std::string id = st.order[st.turn];
    auto& b = st.batches.at(id);
    auto& r = st.running.at(id);
    std::optional<std::pair<uint64_t, batch::input_line>> next;
    try {
      next = st.take(b, r);
    } catch (const std::exception& e) {
      spdlog::error("batch {}: {}", id, e.what());
      r.stop_as = batch_status::failed;
      b.errors.push_back({"server_error", e.what(), "", -1});
    }
    if (!next) {
      ++idle;
      const size_t before = st.order.size();
      try {
        if (r.stop_as == batch_status::failed && r.in_flight == 0) {
          b.status = batch_status::failed;
          b.failed_at = now_s();
          st.save(b);
          st.running.erase(id);
          st.order.erase(st.order.begin() + static_cast<std::ptrdiff_t>(st.turn));
        } else {
          st.finish_if_done(b, r);
        }
      } catch (const std::exception& e) {
        spdlog::error("batch {}: {}", id, e.what());
      }
      if (st.order.size() == before) ++st.turn;  // else the next batch moved into this slot
      continue;
    }
    idle = 0;
    ++st.turn;
    ++st.in_flight;
    ++r.in_flight;
    auto& [index, line] = *next;
    batch_call call{b.id, index, b.tenant, b.endpoint, line.custom_id, std::move(line.body)};
    st.runner(std::move(call), [self = batch_queue_actor(self)](batch_answer a) {
      caf::anon_send(self, bq_answer_atom::value, std::move(a));
    });
  }
}

void on_answer(queue_pointer self, batch_answer& a) {
  auto& st = self->state;
  const auto r_it = st.running.find(a.batch_id);
  if (st.in_flight > 0) --st.in_flight;
  if (r_it == st.running.end()) return;
  auto& r = r_it->second;
  auto& b = st.batches.at(a.batch_id);
  if (r.in_flight > 0) --r.in_flight;
  try {
    if (a.retry) {
      r.waiting.push_back(a.line);
    } else if (!r.answered(a.custom_id)) {
      const std::string line =
          batch::response_line(random_id("batch_req_"), a.custom_id, a.status, a.request_id, a.body);
      if (a.status == 200) {
        r.out.append(line, a.custom_id);
        ++b.counts.completed;
      } else {
        r.err.append(line, a.custom_id);
        ++b.counts.failed;
      }
    }
  } catch (const std::exception& e) {
    // The disk refused the result: the line counts as not answered (a restart runs it again).
    spdlog::error("batch {}: cannot record {}: {}", a.batch_id, a.custom_id, e.what());
    r.stop_as = batch_status::failed;
    b.errors.push_back({"server_error", e.what(), "", -1});
  }
  // A cancelled or expired batch ends with its last answer, whether or not pump gets to it.
  if (r.stop_as && *r.stop_as != batch_status::failed && r.in_flight == 0) {
    try {
      st.finish_if_done(b, r);  // erases r
    } catch (const std::exception& e) {
      spdlog::error("batch {}: {}", a.batch_id, e.what());
    }
  }
  pump(self);
}

void tick(queue_pointer self) {
  auto& st = self->state;
  const int64_t t = now_s();
  for (auto& [id, r] : st.running) {
    for (uint64_t i : r.waiting) r.ready.push_back(i);
    r.waiting.clear();
    auto& b = st.batches.at(id);
    if (!r.stop_as && b.expires_at > 0 && t >= b.expires_at) r.stop_as = batch_status::expired;
  }
  pump(self);
  self->delayed_send(self, kTickEvery, bq_tick_atom::value);
}

// Loads the directory: every unfinished batch runs again (validating ones start now).
void load(batch_queue_state& st) {
  st.store = std::make_unique<batch::batch_store>(st.limits.dir);
  std::unordered_set<std::string> keep;
  for (auto& f : st.store->load_files()) {
    keep.insert(f.id);
    st.tenant_bytes[f.tenant] += f.bytes;
    const std::string id = f.id;
    st.files.emplace(id, std::move(f));
  }
  std::vector<std::string> resume;
  for (auto& b : st.store->load_batches()) {
    if (!batch::is_final(b.status)) {
      keep.insert(b.output_file_id);
      keep.insert(b.error_file_id);
      resume.push_back(b.id);
    }
    const std::string id = b.id;
    st.batches.emplace(id, std::move(b));
  }
  st.store->remove_orphans(keep);
  if (st.store->skipped() > 0)
    spdlog::warn("batch dir {}: {} damaged records skipped", st.limits.dir, st.store->skipped());
  // Oldest first, as they were queued (ids increase as they are made).
  std::sort(resume.begin(), resume.end());
  for (const auto& id : resume) {
    auto& b = st.batches.at(id);
    if (b.status == batch_status::finalizing) b.status = batch_status::in_progress;  // finish() redoes it
    st.start(b);
  }
  if (!resume.empty())
    spdlog::info("batch queue: resuming {} unfinished batch(es) from {}", resume.size(), st.limits.dir);
}

// One page of OpenAI's list object over records (batches or files): newest first (ids
// increase as they are made: random_id), those after `after`, at most `limit`.
template <class Record>
json::object page_json(std::vector<const Record*> mine, const std::string& after, uint32_t limit) {
  std::sort(mine.begin(), mine.end(), [](const Record* x, const Record* y) { return x->id > y->id; });
  size_t start = 0;
  if (!after.empty()) {
    for (size_t i = 0; i < mine.size(); ++i) {
      if (mine[i]->id == after) start = i + 1;
    }
  }
  json::array data;
  for (size_t i = start; i < mine.size() && data.size() < limit; ++i) data.push_back(batch::to_api_json(*mine[i]));
  const bool more = start + data.size() < mine.size();
  json::object o{{"object", "list"}, {"data", std::move(data)}, {"has_more", more}};
  const auto& d = o["data"].get_array();
  o["first_id"] = d.empty() ? json::value(nullptr) : d.front().at("id");
  o["last_id"] = d.empty() ? json::value(nullptr) : d.back().at("id");
  return o;
}

json::object list_json(const batch_queue_state& st, const std::string& tenant, const std::string& after,
                       uint32_t limit) {
  std::vector<const batch_record*> mine;
  for (const auto& [id, b] : st.batches) {
    if (b.tenant == tenant) mine.push_back(&b);
  }
  return page_json(std::move(mine), after, limit);
}

// The tenant's files (of `purpose`, "" = any), newest first, after `after`.
json::object files_json(const batch_queue_state& st, const std::string& tenant, const std::string& purpose,
                        const std::string& after, uint32_t limit) {
  std::vector<const file_record*> mine;
  for (const auto& [id, f] : st.files) {
    if (f.tenant == tenant && (purpose.empty() || f.purpose == purpose)) mine.push_back(&f);
  }
  return page_json(std::move(mine), after, limit);
}

batch_queue_actor::behavior_type batch_queue(queue_pointer self, batch_limits limits, batch_runner runner) {
  auto& init = self->state;
  init.limits = std::move(limits);
  init.runner = std::move(runner);
  try {
    load(init);
  } catch (const std::exception& e) {
    init.unusable = e.what();
    spdlog::warn("the Batch API is off in this server: {}", e.what());
  }
  self->delayed_send(self, kTickEvery, bq_tick_atom::value);
  // Every route answers 500 while the directory is unusable; a disk error inside a handler
  // is a 500 too (the state in memory is unchanged by a write that failed).
  auto guarded = [self](auto&& body) -> batch_reply {
    if (!self->state.unusable.empty()) return error(500, "the batch directory is unusable: " + self->state.unusable);
    try {
      return body();
    } catch (const std::exception& e) {
      spdlog::error("batch queue: {}", e.what());
      return error(500, e.what());
    }
  };
  return {
      [self, guarded](bq_put_atom, std::string& tenant, std::string& filename, std::string& purpose,
                      std::string& content, uint32_t) -> batch_reply {
        return guarded([&]() -> batch_reply {
          auto& st = self->state;
          uint64_t& used = st.tenant_bytes[tenant];
          if (used + content.size() > st.limits.max_tenant_bytes) {
            return error(400,
                         "the tenant's batch files would exceed " + std::to_string(st.limits.max_tenant_bytes) +
                             " bytes: delete some first",
                         "file", "storage_limit_exceeded");
          }
          file_record f{random_id("file-"), tenant, filename, purpose, content.size(), now_s()};
          st.store->put_file(f, content);
          used += f.bytes;
          const json::object o = batch::to_api_json(f);
          st.files.emplace(f.id, std::move(f));
          return ok(o);
        });
      },
      [self, guarded](bq_file_atom, const std::string& tenant, const std::string& id, bool content) -> batch_reply {
        return guarded([&]() -> batch_reply {
          auto& st = self->state;
          const auto it = st.files.find(id);
          if (it == st.files.end() || it->second.tenant != tenant) {
            return error(404, "No such File object: " + id, "file_id");
          }
          if (!content) return ok(batch::to_api_json(it->second));
          return batch_reply{200, st.store->read_content(id), {}, {}, {}};
        });
      },
      [self, guarded](bq_delfile_atom, const std::string& tenant, const std::string& id) -> batch_reply {
        return guarded([&]() -> batch_reply {
          auto& st = self->state;
          const auto it = st.files.find(id);
          if (it == st.files.end() || it->second.tenant != tenant) {
            return error(404, "No such File object: " + id, "file_id");
          }
          for (const auto& [bid, b] : st.batches) {
            if (!batch::is_final(b.status) && b.input_file_id == id) {
              return error(400, "the file is the input of batch " + bid + ", which has not finished", "file_id");
            }
          }
          st.store->remove_file(id);
          st.tenant_bytes[tenant] -= std::min(st.tenant_bytes[tenant], it->second.bytes);
          st.files.erase(it);
          return ok(json::object{{"id", id}, {"object", "file"}, {"deleted", true}});
        });
      },
      [self, guarded](bq_lsfiles_atom, const std::string& tenant, const std::string& purpose, const std::string& after,
                      uint32_t limit) -> batch_reply {
        return guarded([&]() -> batch_reply { return ok(files_json(self->state, tenant, purpose, after, limit)); });
      },
      [self, guarded](bq_create_atom, batch_create& c) -> batch_reply {
        return guarded([&]() -> batch_reply {
          auto& st = self->state;
          const auto f = st.files.find(c.input_file_id);
          if (f == st.files.end() || f->second.tenant != c.tenant) {
            return error(400, "No such File object: " + c.input_file_id, "input_file_id", "invalid_file");
          }
          if (f->second.purpose != "batch") {
            return error(400, "the input file's purpose must be 'batch'", "input_file_id", "invalid_file");
          }
          uint32_t unfinished = 0;
          for (const auto& [id, b] : st.batches) unfinished += b.tenant == c.tenant && !batch::is_final(b.status);
          if (st.tenant_bytes[c.tenant] >= st.limits.max_tenant_bytes) {
            return error(400,
                         "the tenant's batch files (uploads and outputs) hold " +
                             std::to_string(st.tenant_bytes[c.tenant]) + " bytes, the most allowed: delete some first",
                         "input_file_id", "storage_limit_exceeded");
          }
          if (unfinished >= st.limits.max_unfinished_per_tenant) {
            return error(429, "the tenant has " + std::to_string(unfinished) + " unfinished batches, the most allowed",
                         "", "rate_limit_exceeded");
          }
          batch_record b;
          b.id = random_id("batch_");
          b.tenant = c.tenant;
          b.endpoint = c.endpoint;
          b.input_file_id = c.input_file_id;
          b.completion_window = c.completion_window;
          b.metadata = json::parse(c.metadata_json);
          b.created_at = now_s();
          b.expires_at = b.created_at + kWindowSeconds;
          b.output_file_id = random_id("file-");
          b.error_file_id = random_id("file-");
          st.save(b);  // validating, durable: a crash from here on resumes it
          const json::object answer = batch::to_api_json(b);
          auto& stored = st.batches.emplace(b.id, std::move(b)).first->second;
          st.start(stored);
          pump(self);
          return ok(answer);
        });
      },
      [self, guarded](bq_get_atom, const std::string& tenant, const std::string& id) -> batch_reply {
        return guarded([&]() -> batch_reply {
          const auto it = self->state.batches.find(id);
          if (it == self->state.batches.end() || it->second.tenant != tenant) {
            return error(404, "No such Batch object: " + id, "batch_id");
          }
          return ok(batch::to_api_json(it->second));
        });
      },
      [self, guarded](bq_list_atom, const std::string& tenant, const std::string& after,
                      uint32_t limit) -> batch_reply {
        return guarded([&]() -> batch_reply { return ok(list_json(self->state, tenant, after, limit)); });
      },
      [self, guarded](bq_cancel_atom, const std::string& tenant, const std::string& id) -> batch_reply {
        return guarded([&]() -> batch_reply {
          auto& st = self->state;
          const auto it = st.batches.find(id);
          if (it == st.batches.end() || it->second.tenant != tenant) {
            return error(404, "No such Batch object: " + id, "batch_id");
          }
          auto& b = it->second;
          if (b.status == batch_status::cancelling || b.status == batch_status::cancelled) {
            return ok(batch::to_api_json(b));
          }
          if (batch::is_final(b.status)) {
            return error(400, std::string("Cannot cancel a batch with status '") + batch::to_string(b.status) + "'.",
                         "batch_id");
          }
          b.status = batch_status::cancelling;
          b.cancelling_at = now_s();
          st.save(b);
          const json::object answer = batch::to_api_json(b);
          if (auto r = st.running.find(id); r != st.running.end()) {
            r->second.stop_as = batch_status::cancelled;
            st.finish_if_done(b, r->second);  // at once when nothing is in flight
          }
          return ok(answer);
        });
      },
      [self](bq_answer_atom, batch_answer& a) { on_answer(self, a); },
      [self](bq_tick_atom) { tick(self); },
  };
}

}  // namespace

batch_queue_actor spawn_batch_queue(caf::actor_system& sys, batch_limits limits, batch_runner runner) {
  return sys.spawn<caf::detached>(batch_queue, std::move(limits), std::move(runner));
}

}  // namespace tandem
