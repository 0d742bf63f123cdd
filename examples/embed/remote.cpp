// The runtime used from another actor system through CAF's middleman (include/tandem/remote.h).
// Two actor systems in one process stand for two machines: node A loads the model and
// publishes admission on a free port of 127.0.0.1; node B, which has no model, connects to it
// and streams a chat answer into a sink of its own, then cancels a second request remotely.
//
//   embed_remote [MODEL]
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdio>
#include <iostream>

#include "tandem/remote.h"
#include "tandem/runtime.h"

namespace {

using done_atom = caf::atom_constant<caf::atom("done")>;

// Node B's sink: counts what crosses the wire and reports the end to `owner`.
tandem::sink_actor::behavior_type counting_sink(tandem::sink_actor::pointer self, caf::actor owner) {
  auto deltas = std::make_shared<int>(0);
  return {
      [deltas](const tandem::generation_delta& d) {
        ++*deltas;
        std::cout << d.text << std::flush;
      },
      [self, owner, deltas](const tandem::generation_done& d) {
        std::cout << "\n[remote] finish_reason=" << to_string(d.reason) << " deltas=" << *deltas
                  << " completion_tokens=" << d.completion_tokens << std::endl;
        caf::anon_send(owner, done_atom::value, d.reason);
        self->quit();
      },
  };
}

caf::actor_system_config& node_config(caf::actor_system_config& cfg) {
  tandem::tune_actor_system(cfg);
  tandem::add_message_types(cfg);
  cfg.load<caf::io::middleman>();
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  // Node A: the runtime, published.
  caf::actor_system_config cfg_a;
  caf::actor_system node_a{node_config(cfg_a)};
  tandem::runtime_config rc;
  if (argc > 1) rc.model = argv[1];
  rc.kv_cache_tokens = 8192;
  std::unique_ptr<tandem::runtime> rt;
  try {
    rt = tandem::runtime::start(node_a, rc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed_remote: %s\n", e.what());
    return 1;
  }
  auto port = node_a.middleman().publish(rt->admission(), 0, "127.0.0.1");
  if (!port) {
    std::cerr << "embed_remote: publish: " << node_a.render(port.error()) << std::endl;
    return 1;
  }
  std::cout << "embed_remote: admission published on 127.0.0.1:" << *port << std::endl;

  // Node B: a typed handle to node A's admission, and sinks of its own.
  caf::actor_system_config cfg_b;
  caf::actor_system node_b{node_config(cfg_b)};
  auto admission = node_b.middleman().remote_actor<tandem::admission_actor>("127.0.0.1", *port);
  if (!admission) {
    std::cerr << "embed_remote: remote_actor: " << node_b.render(admission.error()) << std::endl;
    return 1;
  }
  tandem::finish_reason chat_reason = tandem::finish_reason::error;
  tandem::finish_reason story_reason = tandem::finish_reason::error;
  {
    caf::scoped_actor self{node_b};
    tandem::generate_request chat;
    chat.messages = {{"user", "Name three colours of the rainbow."}};
    chat.max_tokens = 32;
    chat.sampling.temperature = 0;
    chat.sink = self->spawn(counting_sink, caf::actor_cast<caf::actor>(self));
    bool accepted = false;
    self->request(*admission, std::chrono::seconds(30), tandem::submit_atom::value, chat)
        .receive([&](const tandem::submit_reply& r) { accepted = r.accepted; },
                 [&](const caf::error& e) { std::cerr << "embed_remote: submit: " << node_b.render(e) << std::endl; });
    if (accepted) self->receive([&](done_atom, tandem::finish_reason r) { chat_reason = r; });

    tandem::generate_request story;
    story.prompt = "Write a long story about a lighthouse keeper.";
    story.max_tokens = 400;
    story.ignore_eos = true;
    story.sink = self->spawn(counting_sink, caf::actor_cast<caf::actor>(self));
    tandem::request_id id = 0;
    self->request(*admission, std::chrono::seconds(30), tandem::submit_atom::value, story)
        .receive([&](const tandem::submit_reply& r) { id = r.accepted ? r.id : 0; }, [](const caf::error&) {});
    if (id != 0) {
      self->receive(caf::after(std::chrono::milliseconds(300)) >> [] {});
      self->send(*admission, tandem::cancel_atom::value, id);
      self->receive([&](done_atom, tandem::finish_reason r) { story_reason = r; });
    }
  }
  std::cout << "embed_remote: chat=" << to_string(chat_reason) << " story=" << to_string(story_reason) << std::endl;
  node_a.middleman().unpublish(rt->admission(), *port);
  const bool ok = (chat_reason == tandem::finish_reason::stop || chat_reason == tandem::finish_reason::length) &&
                  story_reason == tandem::finish_reason::abort;
  return ok ? 0 : 1;
}
