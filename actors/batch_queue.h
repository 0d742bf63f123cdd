// batch_queue actor: the one owner of the Batch API's state (files, batches, the queue of
// their lines, the results being written) and of its directory on disk (engine/batch/
// batch_store.h). Detached: its fsyncs and file reads block only its own thread. The HTTP
// routes (net/batch/batch_routes.h) ask it by message; it runs each input line through a runner
// the server gives it (net/batch/batch_runner.h: the line's body parsed as an OpenAI request and
// submitted to admission at kBatchPriority with the tenant's key), and the runner's answer
// comes back as a message.
//
//   route --put(tenant, filename, purpose, content, lines)--> queue --batch_reply (file object)
//   route --file(tenant, id, content?)--------------------->  queue --batch_reply (object or content)
//   route --delfile(tenant, id)---------------------------->  queue --batch_reply
//   route --lsfiles(tenant, purpose, after, limit)--------->  queue --batch_reply (a list)
//   route --create(batch_create)--------------------------->  queue --batch_reply (batch object)
//   route --get / cancel(tenant, id)----------------------->  queue --batch_reply (batch object)
//   route --list(tenant, after, limit)--------------------->  queue --batch_reply (a list)
//   queue --runner(batch_call, done)-->  ...  --answer(batch_answer)--> queue   (one per line)
//   queue --tick (to itself, every second)-->  refused lines retried, expiry, the queue pumped
//
// Invariants: at most limits.max_in_flight lines of all batches run at once (round-robin over
// the running batches); a line's result is appended (fsynced) before it counts; a line
// admission refused for now (429, 503) runs again later and is not an answer; each tenant sees
// only its own files and batches (another's answer 404, as an unknown id).
#pragma once

#include <caf/all.hpp>
#include <cstdint>
#include <functional>
#include <string>

namespace tandem {

struct batch_limits {
  std::string dir;                                // --batch-dir
  uint64_t max_file_bytes = uint64_t{100} << 20;  // an upload at most
  uint32_t max_lines = 50000;                     // requests in one input file at most
  uint32_t max_in_flight = 8;                     // lines running at once, all batches together
  uint64_t max_tenant_bytes = uint64_t{1} << 30;  // a tenant's files (uploads, outputs) together
  uint32_t max_unfinished_per_tenant = 100;       // batches not yet final, per tenant
};

// One input line to run.
struct batch_call {
  std::string batch_id;
  uint64_t line = 0;  // index among the input's non-blank lines
  std::string tenant;
  std::string endpoint;
  std::string custom_id;
  std::string body;  // the request body, JSON text
};

// Its answer: the HTTP status and body the endpoint gave (an OpenAI response or error), or
// retry: admission refused it for now (rate limit, full, stopping), run it again later.
struct batch_answer {
  std::string batch_id;
  uint64_t line = 0;
  std::string custom_id;
  int status = 200;
  std::string request_id;
  std::string body;
  bool retry = false;
};

// Runs `call` and calls `done` once, on any thread.
using batch_runner = std::function<void(batch_call call, std::function<void(batch_answer)> done)>;

// A route's answer: status 200 and the body (JSON text, or a file's content), or an error
// (message, with the request field at fault in param, OpenAI's code in code).
struct batch_reply {
  int status = 200;
  std::string body;
  std::string message;
  std::string param;
  std::string code;
};

struct batch_create {
  std::string tenant;
  std::string input_file_id;
  std::string endpoint;  // checked by the route (one the server serves)
  std::string completion_window = "24h";
  std::string metadata_json = "null";  // an object (checked by the route) or null
};

using bq_put_atom = caf::atom_constant<caf::atom("bqput")>;
using bq_file_atom = caf::atom_constant<caf::atom("bqfile")>;
using bq_delfile_atom = caf::atom_constant<caf::atom("bqdelfile")>;
using bq_lsfiles_atom = caf::atom_constant<caf::atom("bqlsfiles")>;
using bq_create_atom = caf::atom_constant<caf::atom("bqcreate")>;
using bq_get_atom = caf::atom_constant<caf::atom("bqget")>;
using bq_list_atom = caf::atom_constant<caf::atom("bqlist")>;
using bq_cancel_atom = caf::atom_constant<caf::atom("bqcancel")>;
using bq_answer_atom = caf::atom_constant<caf::atom("bqanswer")>;
using bq_tick_atom = caf::atom_constant<caf::atom("bqtick")>;

using batch_queue_actor = caf::typed_actor<
    // tenant, filename, purpose, content (checked JSONL), its line count
    caf::replies_to<bq_put_atom, std::string, std::string, std::string, std::string, uint32_t>::with<batch_reply>,
    // tenant, file id, true: the content (else the file object)
    caf::replies_to<bq_file_atom, std::string, std::string, bool>::with<batch_reply>,
    caf::replies_to<bq_delfile_atom, std::string, std::string>::with<batch_reply>,
    // tenant, purpose ("" = any), after (a file id, "" = from the newest), limit
    caf::replies_to<bq_lsfiles_atom, std::string, std::string, std::string, uint32_t>::with<batch_reply>,
    caf::replies_to<bq_create_atom, batch_create>::with<batch_reply>,
    caf::replies_to<bq_get_atom, std::string, std::string>::with<batch_reply>,
    // tenant, after (a batch id, "" = from the newest), limit
    caf::replies_to<bq_list_atom, std::string, std::string, uint32_t>::with<batch_reply>,
    caf::replies_to<bq_cancel_atom, std::string, std::string>::with<batch_reply>,
    caf::reacts_to<bq_answer_atom, batch_answer>, caf::reacts_to<bq_tick_atom>>;

// Spawns the queue (detached) on `limits.dir`: it loads what is there and resumes every
// unfinished batch, skipping lines already answered. A directory it cannot use makes every
// route answer 500 saying so (the server still serves everything else).
batch_queue_actor spawn_batch_queue(caf::actor_system& sys, batch_limits limits, batch_runner runner);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::batch_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::batch_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::batch_create)
