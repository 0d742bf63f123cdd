#include "net/runtime_probe.h"

#include <chrono>

#include "actors/atoms.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"

namespace tandem::net {

namespace {

// A router's figures: its nodes' latest reports, summed where a single process has one.
void probe_router(caf::actor_system& sys, const runtime& rt, std::function<void(runtime_figures)> done) {
  const auto timeout = std::chrono::seconds(5);
  sys.spawn(
      [router = runtime_access::actors(rt).router, adm = rt.admission(), done, timeout](caf::event_based_actor* self) {
        auto figures = std::make_shared<runtime_figures>();
        figures->ready = true;
        figures->clustered = true;
        auto fail = [self, done](const caf::error&) {
          done(runtime_figures{});
          self->quit();
        };
        self->request(router, timeout, stats_atom::value)
            .then(
                [=](scheduler_stats s) {
                  figures->sched = s;
                  self->request(router, timeout, nodes_atom::value)
                      .then(
                          [=](cluster_stats c) {
                            for (const auto& n : c.nodes) {
                              if (!n.up) continue;
                              figures->kv.pool.total += n.last.kv_blocks_total;
                              figures->kv.pool.used += n.last.kv_blocks_used;
                              figures->kv.prefix_queries += n.last.prefix_queries;
                              figures->kv.prefix_hits += n.last.prefix_hits;
                            }
                            figures->cluster = std::move(c);
                            self->request(adm, timeout, stats_atom::value)
                                .then(
                                    [=](admission_stats a) {
                                      figures->admission = a;
                                      done(*figures);
                                      self->quit();
                                    },
                                    fail);
                          },
                          fail);
                },
                fail);
      });
}

}  // namespace

void probe_runtime(caf::actor_system& sys, const runtime& rt, std::function<void(runtime_figures)> done) {
  if (runtime_access::actors(rt).router) return probe_router(sys, rt, std::move(done));
  const auto timeout = std::chrono::seconds(5);
  sys.spawn([sched = runtime_access::actors(rt).scheduler, cache = runtime_access::actors(rt).cache_manager,
             adm = rt.admission(), speculating = static_cast<bool>(runtime_access::actors(rt).drafter),
             encoder = runtime_access::actors(rt).image_encoder, method = rt.config().speculative, done,
             timeout](caf::event_based_actor* self) {
    auto figures = std::make_shared<runtime_figures>();
    figures->ready = true;
    auto fail = [self, done](const caf::error&) {
      done(runtime_figures{});
      self->quit();
    };
    // The image series come from the requests' own figures (server_metrics), never from the
    // encoder, which answers only between images.
    figures->images = static_cast<bool>(encoder);
    auto finish = [=] {
      done(*figures);
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
                                  if (!speculating) return finish();
                                  self->request(sched, timeout, spec_stats_atom::value)
                                      .then(
                                          [=](speculation_stats sp) {
                                            figures->spec_method = method;
                                            figures->spec = std::move(sp);
                                            finish();
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
