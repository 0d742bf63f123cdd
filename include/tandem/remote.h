// The runtime across CAF's middleman: a host publishes admission on a port, and actors in other
// actor systems (other processes, other machines) submit, stream and cancel as local ones do.
//
//   runtime's node                                 another node
//   cfg.load<caf::io::middleman>();                cfg.load<caf::io::middleman>();
//   tandem::add_message_types(cfg);                tandem::add_message_types(cfg);
//   sys.middleman().publish(rt->admission(),       auto a = sys.middleman().remote_actor<
//                           port, "127.0.0.1");            tandem::admission_actor>(host, port);
//
// Both peers register the messages (CAF 0.17 refuses unregistered types only at run time: a
// typed remote_actor then fails with unexpected_actor_messaging_interface). The sink is an
// actor of the remote node; generate_request::on_delta is not serialized and stays unused there.
// Linking: CAF::io besides Tandem::runtime (examples/embed/remote.cpp).
#pragma once

#include <caf/all.hpp>

#include "tandem/api.h"

namespace tandem {

// Every type admission_actor and sink_actor messages carry (their fields' types come along
// through inspect(); request_id, atoms and strings are CAF's own). Call on the actor system's config before the system
// is created.
inline void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<generate_request>("tandem::generate_request");
  cfg.add_message_type<submit_reply>("tandem::submit_reply");
  cfg.add_message_type<generation_delta>("tandem::generation_delta");
  cfg.add_message_type<generation_done>("tandem::generation_done");
  cfg.add_message_type<admission_stats>("tandem::admission_stats");
}

// What a cluster's router and nodes exchange besides (runtime_config::nodes, docs/cluster.md):
// on every peer's config, with add_message_types, before the system is created.
void add_cluster_message_types(caf::actor_system_config& cfg);

}  // namespace tandem
