// One tiled_fn (dot_kernels.h) from a kernel template over the step's token count:
//   TANDEM_TILED_DISPATCH(name, kernel, args...)  defines  name(nb, tile, acts, act_stride, n_tok, ...)
// calling kernel<n_tok, args...>(nb, tile, acts, act_stride, y, y_stride, next) for n_tok = 1..8.
// A macro, not a template, so that each kernel file (compiled with its own instruction set)
// expands it into its own instruction set's namespace (avx2, avx512) as the function its
// table lists, and no inline definition is shared between the sets.
#pragma once

#define TANDEM_TILED_DISPATCH(name, kernel, ...)                                                              \
  void name(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, int n_tok, float* y, \
            int64_t y_stride, const std::byte* next) {                                                        \
    switch (n_tok) {                                                                                          \
      case 1:                                                                                                 \
        return kernel<1 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 2:                                                                                                 \
        return kernel<2 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 3:                                                                                                 \
        return kernel<3 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 4:                                                                                                 \
        return kernel<4 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 5:                                                                                                 \
        return kernel<5 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 6:                                                                                                 \
        return kernel<6 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 7:                                                                                                 \
        return kernel<7 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      case 8:                                                                                                 \
        return kernel<8 __VA_OPT__(, ) __VA_ARGS__>(nb, tile, acts, act_stride, y, y_stride, next);           \
      default:                                                                                                \
        return;                                                                                               \
    }                                                                                                         \
  }
