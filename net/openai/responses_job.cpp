#include "net/openai/responses_job.h"

#include <boost/json.hpp>
#include <chrono>

#include "actors/runtime_access.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;

prepared_response prepare_response(const responses_request& r, const stored_response& previous, server_context& ctx,
                                   const runtime& rt, std::function<void(stored_response)> keep_local) {
  json::array history;
  if (!previous.id.empty()) history = json::parse(previous.conversation).as_array();
  prepared_response p{responses_api_request(r, history, ctx.limits(rt)), {}};
  if (p.req.model.empty()) p.req.model = ctx.opts.served_model_name;
  auto rj = std::make_shared<responses_job>();
  rj->echo = r.echo;
  rj->stream_id = r.stream_id;
  rj->conversation = std::move(history);
  for (const auto& item : r.input) rj->conversation.push_back(item);
  if (r.store || keep_local) {
    rj->keep = [store = r.store ? ctx.responses : response_store_actor{}, keep_local](stored_response s) {
      if (keep_local) keep_local(s);
      if (store) caf::anon_send(store, keep_atom::value, std::move(s));
    };
  }
  auto& jc = p.ctx;
  jc.tok = &runtime_access::tok(rt);
  jc.metrics = &ctx.metrics;
  jc.model_name = p.req.model;
  jc.response_id = ctx.new_id("resp", '_');
  jc.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  jc.responses = std::move(rj);
  return p;
}

}  // namespace tandem::net
