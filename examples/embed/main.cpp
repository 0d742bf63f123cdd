// A host CAF application that embeds Tandem: it spawns the runtime inside its own
// actor_system, streams one chat answer token by token into an actor of its own, and
// cancels a second generation halfway.
//
//   build/bin/embed_example [MODEL]        (MODEL defaults to the default model)
#include <caf/all.hpp>
#include <cstdio>
#include <iostream>

#include "tandem/runtime.h"
#include "tandem/version.h"

namespace {

using done_atom = caf::atom_constant<caf::atom("done")>;

// The host's own sink: prints deltas as they arrive, then tells `owner` how it ended.
tandem::sink_actor::behavior_type printing_sink(tandem::sink_actor::pointer self, caf::actor owner, std::string label) {
  return {
      [label](const tandem::generation_delta& d) {
        std::cout << d.text << std::flush;
        (void)label;
      },
      [self, owner, label](const tandem::generation_done& d) {
        std::cout << "\n[" << label << "] finish_reason=" << to_string(d.reason) << " prompt_tokens=" << d.prompt_tokens
                  << " completion_tokens=" << d.completion_tokens << " ttft_ms=" << d.ttft_ms << std::endl;
        caf::anon_send(owner, done_atom::value, d.reason);
        self->quit();
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  caf::actor_system sys{cfg};

  tandem::runtime_config rc;
  if (argc > 1) rc.model = argv[1];
  rc.kv_cache_tokens = 8192;
  std::unique_ptr<tandem::runtime> rt;
  try {
    rt = tandem::runtime::start(sys, rc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed_example: %s\n", e.what());
    return 1;
  }

  std::cout << "embed_example: Tandem " << TANDEM_VERSION_STRING << std::endl;
  caf::scoped_actor self{sys};
  // 1. A chat request, streamed into our sink.
  tandem::generate_request chat;
  chat.messages = {{"user", "Name three colours of the rainbow."}};
  chat.max_tokens = 48;
  chat.sampling.temperature = 0;
  chat.sink = self->spawn(printing_sink, caf::actor_cast<caf::actor>(self), "chat");
  self->request(rt->admission(), caf::infinite, tandem::submit_atom::value, chat)
      .receive([](const tandem::submit_reply& r) { std::cout << "[chat] accepted as request " << r.id << std::endl; },
               [&](const caf::error& e) { std::cerr << sys.render(e) << std::endl; });
  tandem::finish_reason reason{};
  self->receive([&](done_atom, tandem::finish_reason r) { reason = r; });

  // 2. A long completion, cancelled after it has started.
  tandem::generate_request story;
  story.prompt = "Write a long story about a lighthouse keeper.";
  story.max_tokens = 400;
  story.ignore_eos = true;  // sampled: an early end-of-text would finish it before the cancel
  story.sink = self->spawn(printing_sink, caf::actor_cast<caf::actor>(self), "story");
  tandem::request_id story_id = 0;
  self->request(rt->admission(), caf::infinite, tandem::submit_atom::value, story)
      .receive([&](const tandem::submit_reply& r) { story_id = r.id; }, [](const caf::error&) {});
  self->receive(caf::after(std::chrono::milliseconds(300)) >> [] {});
  self->send(rt->admission(), tandem::cancel_atom::value, story_id);
  tandem::finish_reason story_reason{};
  self->receive([&](done_atom, tandem::finish_reason r) { story_reason = r; });

  std::cout << "embed_example: chat=" << to_string(reason) << " story=" << to_string(story_reason) << std::endl;
  using tandem::finish_reason;
  const bool chat_ended = reason == finish_reason::stop || reason == finish_reason::length;
  return chat_ended && story_reason == finish_reason::abort ? 0 : 1;
}
