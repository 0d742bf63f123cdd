#include "actors/image_encoder.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>

namespace tandem {
namespace {

// The encoder's threads run as background work (thread_pool::lower_this_thread_priority:
// SCHED_IDLE, or this nice value where Linux refuses that policy).
constexpr int kEncoderNice = 10;

struct image_encoder_state {
  std::shared_ptr<const vision::projector> projector;
  vision::image_limits limits;
  std::shared_ptr<thread_pool> pool;
  static inline const char* name = "tandem.image_encoder";
};

image_encoder_actor::behavior_type image_encoder(image_encoder_actor::stateful_pointer<image_encoder_state> self,
                                                 std::shared_ptr<const vision::projector> projector,
                                                 vision::image_limits limits, std::shared_ptr<thread_pool> pool) {
  thread_pool::lower_this_thread_priority(kEncoderNice);  // the actor's own thread (the pool's thread 0)
  auto& init = self->state;
  init.projector = std::move(projector);
  init.limits = limits;
  init.pool = std::move(pool);
  return {
      [self](encode_atom, const std::vector<std::string>& uris, uint64_t max_rows) -> image_reply {
        auto& st = self->state;
        image_reply r;
        for (size_t i = 0; i < uris.size(); ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          try {
            const std::string bytes = vision::decode_data_uri(uris[i], st.limits.max_bytes);
            r.images.push_back(vision::encode_image(*st.projector, bytes, st.limits, *st.pool, max_rows));
            const uint64_t width = st.projector->hparams().n_embd_text;  // floats a row
            for (const auto& tile : r.images.back().tiles) max_rows -= std::min<uint64_t>(max_rows, tile->size() / width);
          } catch (const std::exception& e) {
            return {{}, {}, e.what(), static_cast<int32_t>(i)};
          }
          r.encode_seconds.push_back(std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count());
        }
        return r;
      },
  };
}

}  // namespace

image_encoder_actor spawn_image_encoder(caf::actor_system& sys, std::shared_ptr<const vision::projector> projector,
                                        vision::image_limits limits, int n_threads) {
  return sys.spawn<caf::detached>(image_encoder, std::move(projector), limits,
                                  std::make_shared<thread_pool>(n_threads, kEncoderNice));
}

}  // namespace tandem
