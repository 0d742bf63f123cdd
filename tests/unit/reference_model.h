// The reference forward pass (the oracle the fast one is checked against): plain loops,
// double accumulators, weights decoded to floats, a contiguous K/V history per sequence. No
// activation quantization, no half-precision cache, no skipped blocks: it is each
// architecture's mathematics (engine/model/architecture.h), written out once per step.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/quantize.h"
#include "engine/model/model_config.h"

namespace tandem::test {

class reference_model {
 public:
  explicit reference_model(const gguf::file& f) : c_(read_model_config(f)), f_(f) {
    if (f_.find_tensor("rope_freqs.weight")) {
      rope_factors_ = vec("rope_freqs.weight");
    } else if (c_.has_rope_long_short) {
      rope_factors_ =
          vec(c_.n_ctx_train > c_.rope_original_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight");
    }
  }

  const model_config& config() const { return c_; }

  // Feeds one token at the next position; returns logits [n_vocab].
  std::vector<double> step(int32_t token) {
    const int64_t E = c_.n_embd, hd = c_.head_dim, F = c_.n_ff, Q = c_.q_dim(), KV = c_.kv_dim();
    const architecture_traits& a = *c_.arch;
    const int64_t pos = static_cast<int64_t>(k_hist_.empty() ? 0 : k_hist_[0].size());
    if (k_hist_.empty()) {
      k_hist_.resize(c_.n_layer);
      v_hist_.resize(c_.n_layer);
    }
    std::vector<double> x = row("token_embd.weight", token);  // [E]
    if (a.scale_embeddings) {
      for (auto& v : x) v *= std::sqrt(static_cast<double>(E));
    }
    for (uint32_t l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const std::vector<double> h = rms_norm(x, vec(p + "attn_norm.weight"));  // [E]
      std::vector<double> q, k, v;
      if (f_.find_tensor(p + "attn_qkv.weight")) {
        const std::vector<double> qkv = matvec(p + "attn_qkv.weight", h);  // [Q + 2 KV]
        q.assign(qkv.begin(), qkv.begin() + Q);
        k.assign(qkv.begin() + Q, qkv.begin() + Q + KV);
        v.assign(qkv.begin() + Q + KV, qkv.end());
      } else {
        q = matvec(p + "attn_q.weight", h);  // [Q]
        k = matvec(p + "attn_k.weight", h);  // [KV]
        v = matvec(p + "attn_v.weight", h);  // [KV]
      }
      add_if_present(q, p + "attn_q.bias");
      add_if_present(k, p + "attn_k.bias");
      add_if_present(v, p + "attn_v.bias");
      if (a.qk_norm) {
        norm_heads(q, c_.n_head, vec(p + "attn_q_norm.weight"));
        norm_heads(k, c_.n_head_kv, vec(p + "attn_k_norm.weight"));
      }
      const double base = c_.is_swa(l) ? c_.rope_freq_base_swa : c_.rope_freq_base;
      rope(q, c_.n_head, pos, base);
      rope(k, c_.n_head_kv, pos, base);
      k_hist_[l].push_back(k);  // k_hist_[l][position] = [KV]
      v_hist_[l].push_back(v);
      const int64_t first = c_.first_visible_key(l, static_cast<int32_t>(pos));
      std::vector<double> attn(Q, 0.0);  // [Q]
      const uint32_t group = c_.n_head / c_.n_head_kv;
      for (uint32_t head = 0; head < c_.n_head; ++head) {
        const uint32_t kvh = head / group;
        std::vector<double> score(pos + 1 - first);  // [visible keys]
        for (int64_t j = first; j <= pos; ++j) {
          double s = 0;
          for (int64_t i = 0; i < hd; ++i) s += q[head * hd + i] * k_hist_[l][j][kvh * hd + i];
          score[j - first] = s * c_.attention_scale;
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (auto& s : score) sum += (s = std::exp(s - mx));
        for (int64_t j = first; j <= pos; ++j) {
          for (int64_t i = 0; i < hd; ++i) attn[head * hd + i] += score[j - first] / sum * v_hist_[l][j][kvh * hd + i];
        }
      }
      std::vector<double> o = matvec(p + "attn_output.weight", attn);  // [E]
      if (a.post_norms) o = rms_norm(o, vec(p + "post_attention_norm.weight"));
      for (int64_t i = 0; i < E; ++i) x[i] += o[i];
      const std::vector<double> h2 = rms_norm(x, vec(p + "ffn_norm.weight"));  // [E]
      std::vector<double> g, u;
      if (a.fused_gate_up) {
        const std::vector<double> gu = matvec(p + "ffn_up.weight", h2);  // [2F]: gate rows, then up rows
        g.assign(gu.begin(), gu.begin() + F);
        u.assign(gu.begin() + F, gu.end());
      } else {
        g = matvec(p + "ffn_gate.weight", h2);  // [F]
        u = matvec(p + "ffn_up.weight", h2);    // [F]
      }
      for (int64_t i = 0; i < F; ++i) g[i] = activation(g[i]) * u[i];
      std::vector<double> d = matvec(p + "ffn_down.weight", g);  // [E]
      if (a.post_norms) d = rms_norm(d, vec(p + "post_ffw_norm.weight"));
      for (int64_t i = 0; i < E; ++i) x[i] += d[i];
    }
    const std::vector<double> h = rms_norm(x, vec("output_norm.weight"));
    std::vector<double> logits = matvec(c_.tied_output ? "token_embd.weight" : "output.weight", h);  // [n_vocab]
    if (c_.final_logit_softcap > 0.0f) {
      for (auto& z : logits) z = c_.final_logit_softcap * std::tanh(z / c_.final_logit_softcap);
    }
    return logits;
  }

 private:
  double activation(double g) const {
    if (c_.arch->activation == ffn_activation::gelu_tanh) {
      const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
      return 0.5 * g * (1.0 + std::tanh(kSqrt2OverPi * g * (1.0 + 0.044715 * g * g)));
    }
    return g / (1.0 + std::exp(-g));
  }
  std::vector<double> row(const std::string& name, int64_t r) const {
    const auto* t = f_.find_tensor(name);
    std::vector<float> tmp(t->ne[0]);
    dequantize_row(t->type, t->data + r * row_bytes(t->type, t->ne[0]), t->ne[0], tmp.data());
    return {tmp.begin(), tmp.end()};
  }
  std::vector<double> vec(const std::string& name) const { return row(name, 0); }
  void add_if_present(std::vector<double>& y, const std::string& name) const {
    if (!f_.find_tensor(name)) return;
    const std::vector<double> b = vec(name);
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
  }
  // y[r] = sum_c W[r][c] x[c], W = tensor `name` with rows of length x.size().
  std::vector<double> matvec(const std::string& name, const std::vector<double>& x) const {
    const auto* t = f_.find_tensor(name);
    std::vector<double> y(t->n_rows());
    for (int64_t r = 0; r < t->n_rows(); ++r) {
      const std::vector<double> w = row(name, r);
      double s = 0;
      for (size_t i = 0; i < x.size(); ++i) s += w[i] * x[i];
      y[r] = s;
    }
    return y;
  }
  std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c_.rms_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
    return y;
  }
  // RMSNorm of each head of v (heads of head_dim values side by side) with one weight.
  void norm_heads(std::vector<double>& v, uint32_t n_heads, const std::vector<double>& w) const {
    for (uint32_t h = 0; h < n_heads; ++h) {
      std::vector<double> head(v.begin() + h * c_.head_dim, v.begin() + (h + 1) * c_.head_dim);
      head = rms_norm(head, w);
      std::copy(head.begin(), head.end(), v.begin() + h * c_.head_dim);
    }
  }
  // Rotates pair i of each head by pos * base^(-2i/n_rot) / factor_i (times the linear
  // scaling), and scales it by the LongRoPE magnitude. The pair is (2i, 2i+1) for normal
  // RoPE, (i, i + n_rot/2) for NeoX.
  void rope(std::vector<double>& v, uint32_t n_heads, int64_t pos, double base) const {
    const bool neox = c_.arch->rope == rope_style::neox;
    const double linear = c_.rope_scaling == rope_scaling_type::linear ? 1.0 / c_.rope_scaling_factor : 1.0;
    for (uint32_t h = 0; h < n_heads; ++h) {
      for (uint32_t i = 0; i < c_.n_rot / 2; ++i) {
        const double factor = rope_factors_.empty() ? 1.0 : rope_factors_[i];
        const double theta = linear * static_cast<double>(pos) * std::pow(base, -2.0 * i / c_.n_rot) / factor;
        const double m = c_.rope_attn_factor;
        double& a = v[h * c_.head_dim + (neox ? i : 2 * i)];
        double& b = v[h * c_.head_dim + (neox ? i + c_.n_rot / 2 : 2 * i + 1)];
        const double na = m * (a * std::cos(theta) - b * std::sin(theta));
        const double nb = m * (a * std::sin(theta) + b * std::cos(theta));
        a = na;
        b = nb;
      }
    }
  }

  model_config c_;
  const gguf::file& f_;
  std::vector<double> rope_factors_;                               // [n_rot / 2] or empty
  std::vector<std::vector<std::vector<double>>> k_hist_, v_hist_;  // [layer][pos][kv_dim]
};

}  // namespace tandem::test
