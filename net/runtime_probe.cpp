#include "net/runtime_probe.h"

#include <chrono>

#include "actors/runtime_actors.h"

namespace tandem::net {

void probe_runtime(caf::actor_system& sys, const runtime& rt, std::function<void(runtime_figures)> done) {
  const auto timeout = std::chrono::seconds(5);
  sys.spawn([sched = rt.actors().scheduler, cache = rt.actors().cache_manager, adm = rt.admission(),
             verifier = rt.actors().verifier, method = rt.config().speculative, done,
             timeout](caf::event_based_actor* self) {
    auto figures = std::make_shared<runtime_figures>();
    figures->ready = true;
    auto fail = [self, done](const caf::error&) {
      done(runtime_figures{});
      self->quit();
    };
    self->request(sched, timeout, stats_atom::value)
        .then(
            [=](scheduler_stats s) {
              figures->sched = s;
              self->request(cache, timeout, stats_atom::value)
                  .then(
                      [=](kv_cache_stats k) {
                        figures->kv = k;
                        self->request(adm, timeout, stats_atom::value)
                            .then(
                                [=](admission_stats a) {
                                  figures->admission = a;
                                  if (!verifier) {
                                    done(*figures);
                                    return self->quit();
                                  }
                                  self->request(verifier, timeout, stats_atom::value)
                                      .then(
                                          [=](speculation_stats sp) {
                                            figures->spec_method = method;
                                            figures->spec = std::move(sp);
                                            done(*figures);
                                            self->quit();
                                          },
                                          fail);
                                },
                                fail);
                      },
                      fail);
            },
            fail);
  });
}

}  // namespace tandem::net
