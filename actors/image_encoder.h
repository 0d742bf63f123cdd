// image_encoder actor: the images of chat requests (--mmproj) decoded, checked and encoded
// into the language model's embedding space, off the scheduler's step loop. It runs
// detached, on its own thread, one image at a time, with a thread pool of its own at a
// lower scheduling priority (SCHED_IDLE, or nice 10 where Linux refuses it; its thread too):
// the kernel gives the cores to the device worker's steps first, and the encoder has what
// they leave (every core between steps). A large image delays its own request, not the
// streams beside it.
//
//   streamer --encode(images)--> image_encoder --image_reply--> streamer
//   streamer --enqueue(sequence_request with the image runs)--> scheduler --> device worker
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.h"
#include "engine/platform/thread_pool.h"
#include "engine/vision/image_prompt.h"
#include "tandem/atoms.h"

namespace tandem {



// The encode times travel with the reply to the request's streamer and on to the server's
// metrics (generation_done::image_encode_seconds): nothing asks the encoder for figures, as
// it answers only between images.
struct image_reply {
  std::vector<vision::encoded_image> images;  // in request order; empty on error
  std::vector<float> encode_seconds;          // per image encoded: decode and encode time
  std::string error;                          // what is wrong (a 400's message)
  int32_t bad_index = -1;                     // the image at fault
};

// The request's images (data: URIs) and how many image rows they may take together (the
// model's context): an image past that is refused before it is encoded.
using image_encoder_actor =
    caf::typed_actor<caf::replies_to<encode_atom, std::vector<std::string>, uint64_t>::with<image_reply>>;

// Each request's images arrive as the client wrote them (data: URIs); the encoder decodes
// their payloads (at most limits.max_bytes each), then the images. n_threads: its pool's
// size (<= 0: one per core), as --threads sets the device worker's.
image_encoder_actor spawn_image_encoder(caf::actor_system& sys, std::shared_ptr<const vision::projector> projector,
                                        vision::image_limits limits, int n_threads);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::image_reply)
