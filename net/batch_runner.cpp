#include "net/batch_runner.h"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "net/generation_request.h"
#include "net/live_job.h"
#include "net/routes.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace {

// The key admission knows the tenant by: its first (open mode: none). Batches keep the
// tenant's name, never a key, on disk.
std::optional<std::string> key_of(const runtime& rt, const std::string& tenant) {
  const auto& tenants = rt.config().tenants;
  if (tenants.empty()) return std::string();
  for (const auto& t : tenants) {
    if (t.name == tenant && !t.api_keys.empty()) return t.api_keys.front();
  }
  return std::nullopt;
}

batch_answer answer_of(const batch_call& call, const http_reply& reply, std::string request_id) {
  batch_answer a;
  a.batch_id = call.batch_id;
  a.line = call.line;
  a.custom_id = call.custom_id;
  a.status = reply.status;
  a.body = reply.body;
  a.request_id = std::move(request_id);
  // Refused for now (rate limit, queue full, the server stopping): not an answer.
  a.retry = reply.status == 429 || reply.status == 503;
  return a;
}

void run_line(const std::shared_ptr<server_context>& ctx, const runtime& rt, batch_call call,
              std::function<void(batch_answer)> done) {
  const auto key = key_of(rt, call.tenant);
  if (!key) {
    done(answer_of(call,
                   error_reply(api_error(401, "the batch's tenant '" + call.tenant + "' has no API key now", "",
                                         "invalid_api_key")),
                   ""));
    return;
  }
  const api_kind kind = call.endpoint == "/v1/completions" ? api_kind::completion : api_kind::chat;
  api_request req;
  try {
    req = parse_api_request(parse_json_body(call.body), kind, ctx->limits());
  } catch (const api_error& e) {
    done(answer_of(call, error_reply(e), ""));
    return;
  }
  req.stream = false;
  req.include_usage = false;
  req.gen.priority = kBatchPriority;  // after every interactive request; preempted first
  job_context jc = completion_context(req, *ctx, rt, ctx->new_id(kind == api_kind::chat ? "chatcmpl" : "cmpl"));
  const std::string request_id = jc.response_id;
  auto lj = std::make_shared<live_job>(generation_job(
      std::move(req), kind == api_kind::chat ? job_format::chat_json : job_format::completion_json, std::move(jc)));
  // The job keeps itself alive through `hold` until it has finished; then it answers once and
  // lets go (the strand's call that ran notify holds it until that call returns). A choice
  // aborted by the runtime (it is stopping) reads as "stop" in a JSON body: such a line is
  // not answered but run again (retry), after the restart.
  auto hold = std::make_shared<std::shared_ptr<live_job>>(lj);
  auto aborted = std::make_shared<bool>(false);  // touched on the strand only
  lj->notify = [hold, aborted, call = std::move(call), done = std::move(done), request_id]() mutable {
    const std::shared_ptr<live_job> l = *hold;
    if (!l || !l->job.finished()) return;
    hold->reset();
    batch_answer a = answer_of(call, generation_reply(l->job), request_id);
    a.retry = a.retry || *aborted;
    done(std::move(a));
  };
  // start_live_job's loop, with each final event looked at for an abort first.
  const auto ex = boost::asio::make_strand(ctx->work);
  auto reqs = lj->job.requests();
  for (uint32_t i = 0; i < reqs.size(); ++i) {
    reqs[i].api_key = *key;
    reqs[i].stream_interval = ctx->opts.stream_interval;
    std::weak_ptr<live_job> weak = lj;
    auto callback = [weak, ex, i, aborted](sink_event ev) {
      boost::asio::post(ex, [weak, i, aborted, ev = std::move(ev)]() mutable {
        if (const auto* d = std::get_if<generation_done>(&ev); d && d->reason == finish_reason::abort) *aborted = true;
        if (auto l = weak.lock()) {
          l->job.on_event(i, std::move(ev));
          if (l->notify) l->notify();
        }
      });
    };
    lj->sinks.push_back(spawn_request_sink(ctx->sys, rt.admission(), std::move(reqs[i]), std::move(callback)));
  }
}

}  // namespace

batch_runner make_batch_runner(std::weak_ptr<server_context> ctx, const runtime& rt) {
  return [weak = std::move(ctx), rt = &rt](batch_call call, std::function<void(batch_answer)> done) {
    const auto c = weak.lock();
    if (!c) {
      batch_answer a;
      a.batch_id = call.batch_id;
      a.line = call.line;
      a.custom_id = call.custom_id;
      a.retry = true;
      done(std::move(a));
      return;
    }
    // Parsing a body (up to the request size limit) is work for the pool, not the queue's thread.
    boost::asio::post(c->work, [weak, rt, call = std::move(call), done = std::move(done)]() mutable {
      const auto alive = weak.lock();
      if (!alive) return done(batch_answer{call.batch_id, call.line, call.custom_id, 503, "", "", true});
      run_line(alive, *rt, std::move(call), std::move(done));
    });
  };
}

}  // namespace tandem::net
