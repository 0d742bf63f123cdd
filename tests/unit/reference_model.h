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
  // The experts each layer's mixture chose for the last token, strongest first.
  const std::vector<std::vector<int32_t>>& last_experts() const { return last_experts_; }
  // How far the k-th choice's value (probability or logit) stood above the next expert's, per
  // layer (infinity when every expert is chosen): a near tie where it is tiny.
  const std::vector<double>& last_margins() const { return last_margins_; }
  // The last step's final hidden state, after the output norm (what embeddings pool).
  const std::vector<double>& last_hidden() const { return last_hidden_; }

  // A whole sequence at once, as an encoder runs it (architecture.h's hooks: encoder inputs,
  // norms before or after the residual adds, LayerNorm or RMSNorm, a gated or ungated FFN
  // with its biases, RoPE or none, causal or bidirectional attention); returns each token's
  // final hidden state [T][n_embd] (through the output norm where the architecture has one).
  // Dense layers without sliding windows or sinks only.
  std::vector<std::vector<double>> hidden_states(const std::vector<int32_t>& tokens) const {
    const int64_t E = c_.n_embd, hd = c_.head_dim, F = c_.n_ff, Q = c_.q_dim(), KV = c_.kv_dim();
    const auto T = static_cast<int64_t>(tokens.size());
    const architecture_traits& a = *c_.arch;
    const bool post = a.placement == norm_placement::post;
    auto norm = [&](const std::vector<double>& x, const std::string& name) {
      return a.norm == norm_kind::layer ? layer_norm(x, vec(name + ".weight"), vec(name + ".bias"))
                                        : rms_norm(x, vec(name + ".weight"));
    };
    std::vector<std::vector<double>> x(T);  // [T][E]
    for (int64_t t = 0; t < T; ++t) {
      x[t] = row("token_embd.weight", tokens[t]);
      if (a.scale_embeddings) {
        for (auto& v : x[t]) v *= std::sqrt(static_cast<double>(E));
      }
      if (!a.encoder_inputs) continue;
      if (f_.find_tensor("token_types.weight")) add_row(x[t], "token_types.weight", 0);
      if (a.position_embeddings) add_row(x[t], "position_embd.weight", t);
      x[t] = norm(x[t], "token_embd_norm");
    }
    for (uint32_t l = 0; l < c_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<double> h = post ? x[t] : norm(x[t], p + "attn_norm");
        if (f_.find_tensor(p + "attn_qkv.weight")) {
          std::vector<double> qkv = matvec(p + "attn_qkv.weight", h);
          add_if_present(qkv, p + "attn_qkv.bias");
          q[t].assign(qkv.begin(), qkv.begin() + Q);
          k[t].assign(qkv.begin() + Q, qkv.begin() + Q + KV);
          v[t].assign(qkv.begin() + Q + KV, qkv.end());
        } else {
          q[t] = matvec(p + "attn_q.weight", h);
          k[t] = matvec(p + "attn_k.weight", h);
          v[t] = matvec(p + "attn_v.weight", h);
          add_if_present(q[t], p + "attn_q.bias");
          add_if_present(k[t], p + "attn_k.bias");
          add_if_present(v[t], p + "attn_v.bias");
        }
        if (a.rope != rope_style::none) {
          rope(q[t], c_.n_head, t, false);
          rope(k[t], c_.n_head_kv, t, false);
        }
      }
      const uint32_t group = c_.n_head / c_.n_head_kv;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t end = c_.causal ? t + 1 : T;  // keys [0, end)
        std::vector<double> attn(Q, 0.0);
        for (uint32_t head = 0; head < c_.n_head; ++head) {
          const uint32_t kvh = head / group;
          std::vector<double> score(end);
          for (int64_t j = 0; j < end; ++j) {
            double sc = 0;
            for (int64_t i = 0; i < hd; ++i) sc += q[t][head * hd + i] * k[j][kvh * hd + i];
            score[j] = sc * c_.attention_scale;
          }
          const double mx = *std::max_element(score.begin(), score.end());
          double sum = 0;
          for (auto& sc : score) sum += (sc = std::exp(sc - mx));
          for (int64_t j = 0; j < end; ++j) {
            for (int64_t i = 0; i < hd; ++i) attn[head * hd + i] += score[j] / sum * v[j][kvh * hd + i];
          }
        }
        std::vector<double> o = matvec(p + "attn_output.weight", attn);
        add_if_present(o, p + "attn_output.bias");
        if (a.post_norms) o = rms_norm(o, vec(p + "post_attention_norm.weight"));
        q[t] = o;  // held until every token's attention is done
      }
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < E; ++i) x[t][i] += q[t][i];
        if (post) x[t] = norm(x[t], p + "attn_output_norm");
        const std::vector<double> h = post ? x[t] : norm(x[t], p + std::string(a.ffn_norm));
        std::vector<double> u = matvec(p + "ffn_up.weight", h);  // [F]
        if (a.gated_ffn) {
          const std::vector<double> g = matvec(p + "ffn_gate.weight", h);
          for (int64_t i = 0; i < F; ++i) u[i] = glu(g[i], u[i]);
        } else {
          add_if_present(u, p + "ffn_up.bias");
          for (int64_t i = 0; i < F; ++i) u[i] = glu(u[i], 1.0);
        }
        std::vector<double> d = matvec(p + "ffn_down.weight", u);
        if (!a.gated_ffn) add_if_present(d, p + "ffn_down.bias");
        if (a.post_norms) d = rms_norm(d, vec(p + "post_ffw_norm.weight"));
        for (int64_t i = 0; i < E; ++i) x[t][i] += d[i];
        if (post) x[t] = norm(x[t], p + "layer_output_norm");
      }
    }
    if (a.output_norm) {
      for (auto& r : x) r = rms_norm(r, vec("output_norm.weight"));
    }
    return x;
  }

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
      rope(q, c_.n_head, pos, c_.is_swa(l));
      rope(k, c_.n_head_kv, pos, c_.is_swa(l));
      k_hist_[l].push_back(k);  // k_hist_[l][position] = [KV]
      v_hist_[l].push_back(v);
      const int64_t first = c_.first_visible_key(l, static_cast<int32_t>(pos));
      std::vector<double> attn(Q, 0.0);  // [Q]
      const uint32_t group = c_.n_head / c_.n_head_kv;
      const std::vector<double> sinks = a.attention_sinks ? vec(p + "attn_sinks.weight") : std::vector<double>{};
      for (uint32_t head = 0; head < c_.n_head; ++head) {
        const uint32_t kvh = head / group;
        std::vector<double> score(pos + 1 - first);  // [visible keys]
        for (int64_t j = first; j <= pos; ++j) {
          double s = 0;
          for (int64_t i = 0; i < hd; ++i) s += q[head * hd + i] * k_hist_[l][j][kvh * hd + i];
          score[j - first] = s * c_.attention_scale;
        }
        // A sink logit joins the denominator (and the maximum) only.
        const double sink = sinks.empty() ? -INFINITY : sinks[head];
        const double mx = std::max(sink, *std::max_element(score.begin(), score.end()));
        double sum = sinks.empty() ? 0.0 : std::exp(sink - mx);
        for (auto& s : score) sum += (s = std::exp(s - mx));
        for (int64_t j = first; j <= pos; ++j) {
          for (int64_t i = 0; i < hd; ++i) attn[head * hd + i] += score[j - first] / sum * v_hist_[l][j][kvh * hd + i];
        }
      }
      std::vector<double> o = matvec(p + "attn_output.weight", attn);  // [E]
      add_if_present(o, p + "attn_output.bias");
      if (a.post_norms) o = rms_norm(o, vec(p + "post_attention_norm.weight"));
      for (int64_t i = 0; i < E; ++i) x[i] += o[i];
      const std::vector<double> h2 = rms_norm(x, vec(p + std::string(a.ffn_norm) + ".weight"));  // [E]
      std::vector<double> d;                                                                     // [E]
      if (c_.has_experts()) {
        d = mixture(l, p, h2);
      } else {
        std::vector<double> g, u;
        if (a.fused_gate_up) {
          const std::vector<double> gu = matvec(p + "ffn_up.weight", h2);  // [2F]: gate rows, then up rows
          g.assign(gu.begin(), gu.begin() + F);
          u.assign(gu.begin() + F, gu.end());
        } else {
          g = matvec(p + "ffn_gate.weight", h2);  // [F]
          u = matvec(p + "ffn_up.weight", h2);    // [F]
        }
        for (int64_t i = 0; i < F; ++i) g[i] = glu(g[i], u[i]);
        d = matvec(p + "ffn_down.weight", g);
      }
      if (a.post_norms) d = rms_norm(d, vec(p + "post_ffw_norm.weight"));
      for (int64_t i = 0; i < E; ++i) x[i] += d[i];
    }
    const std::vector<double> h = rms_norm(x, vec("output_norm.weight"));
    last_hidden_ = h;
    std::vector<double> logits = matvec(c_.tied_output ? "token_embd.weight" : "output.weight", h);  // [n_vocab]
    if (c_.final_logit_softcap > 0.0f) {
      for (auto& z : logits) z = c_.final_logit_softcap * std::tanh(z / c_.final_logit_softcap);
    }
    return logits;
  }

 private:
  // act(g) * u, the architecture's gated activation.
  double glu(double g, double u) const {
    switch (c_.arch->activation) {
      case ffn_activation::gelu_tanh: {
        const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
        return 0.5 * g * (1.0 + std::tanh(kSqrt2OverPi * g * (1.0 + 0.044715 * g * g))) * u;
      }
      case ffn_activation::swiglu_oai: {  // gate clamped above, up both ways, at 7; sigmoid(1.702 x)
        const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
        return x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
      }
      case ffn_activation::silu:
        break;
    }
    return g / (1.0 + std::exp(-g)) * u;
  }
  // A mixture of experts (architecture.h's gating): the router's k experts, each
  // down_e(act(gate_e h) * up_e h) with its biases when the file has them, weighted.
  std::vector<double> mixture(uint32_t layer, const std::string& p, const std::vector<double>& h) {
    const int64_t NE = c_.n_expert, F = c_.n_ff_exp, E = c_.n_embd;
    const int k = static_cast<int>(c_.n_expert_used);
    std::vector<double> z = matvec(p + "ffn_gate_inp.weight", h);  // [NE]
    add_if_present(z, p + "ffn_gate_inp.bias");
    auto softmax = [](std::vector<double> v) {
      const double mx = *std::max_element(v.begin(), v.end());
      double sum = 0;
      for (auto& x : v) sum += (x = std::exp(x - mx));
      for (auto& x : v) x /= sum;
      return v;
    };
    const std::vector<double> sel = c_.arch->gating == expert_gating::softmax ? softmax(z) : z;
    std::vector<int32_t> chosen(static_cast<size_t>(NE));
    for (int32_t e = 0; e < NE; ++e) chosen[static_cast<size_t>(e)] = e;
    std::stable_sort(chosen.begin(), chosen.end(), [&](int32_t a, int32_t b) { return sel[a] > sel[b]; });
    if (last_margins_.size() < c_.n_layer) last_margins_.resize(c_.n_layer);
    last_margins_[layer] = k < NE ? sel[chosen[k - 1]] - sel[chosen[k]] : INFINITY;
    chosen.resize(static_cast<size_t>(k));
    std::vector<double> w(static_cast<size_t>(k));  // [k]
    for (int i = 0; i < k; ++i) w[i] = sel[chosen[i]];
    if (c_.arch->gating == expert_gating::softmax_of_top_k) w = softmax(w);
    if (c_.arch->expert_weights_norm) {
      double sum = 0;
      for (double v : w) sum += v;
      for (double& v : w) v /= std::max(sum, 6.103515625e-5);
    }
    if (last_experts_.size() < c_.n_layer) last_experts_.resize(c_.n_layer);
    last_experts_[layer] = chosen;
    std::vector<double> out(E, 0.0);
    for (int i = 0; i < k; ++i) {
      const int64_t e = chosen[i];
      std::vector<double> g = matvec_rows(p + "ffn_gate_exps.weight", h, e * F, F);  // [F]
      std::vector<double> u = matvec_rows(p + "ffn_up_exps.weight", h, e * F, F);    // [F]
      add_rows_if_present(g, p + "ffn_gate_exps.bias", e * F);
      add_rows_if_present(u, p + "ffn_up_exps.bias", e * F);
      for (int64_t j = 0; j < F; ++j) g[j] = glu(g[j], u[j]);
      std::vector<double> d = matvec_rows(p + "ffn_down_exps.weight", g, e * E, E);  // [E]
      add_rows_if_present(d, p + "ffn_down_exps.bias", e * E);
      for (int64_t j = 0; j < E; ++j) out[j] += w[i] * d[j];
    }
    return out;
  }
  // y[r] = sum_c W[first + r][c] x[c] for r < n.
  std::vector<double> matvec_rows(const std::string& name, const std::vector<double>& x, int64_t first,
                                  int64_t n) const {
    std::vector<double> y(n);
    for (int64_t r = 0; r < n; ++r) {
      const std::vector<double> w = row(name, first + r);
      double s = 0;
      for (size_t i = 0; i < x.size(); ++i) s += w[i] * x[i];
      y[r] = s;
    }
    return y;
  }
  // y += bias[first ...] when the file has the (flat) bias tensor.
  void add_rows_if_present(std::vector<double>& y, const std::string& name, int64_t first) const {
    const auto* t = f_.find_tensor(name);
    if (!t) return;
    std::vector<float> b(static_cast<size_t>(t->n_elements()));
    dequantize_row(t->type, t->data, t->n_elements(), b.data());
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[static_cast<size_t>(first) + i];
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
  // y += row r of tensor `name`.
  void add_row(std::vector<double>& y, const std::string& name, int64_t r) const {
    const std::vector<double> b = row(name, r);
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
  }
  std::vector<double> layer_norm(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& b) const {
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= static_cast<double>(x.size());
    for (double v : x) var += (v - mean) * (v - mean);
    const double scale = 1.0 / std::sqrt(var / static_cast<double>(x.size()) + c_.norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * scale * w[i] + b[i];
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
  // Rotates pair i of each head by pos * base^(-2i/n_rot) / factor_i times the scale (the
  // local layers' base and scale on a local layer), and scales it by the LongRoPE magnitude.
  // YaRN: the scaled angle blended with the unscaled one on the pairs below its correction
  // range (ramp 1 below low, 0 above high), the magnitude times 1 + 0.1 ln(1 / scale). The
  // pair is (2i, 2i+1) for normal RoPE, (i, i + n_rot/2) for NeoX.
  void rope(std::vector<double>& v, uint32_t n_heads, int64_t pos, bool local) const {
    const bool neox = c_.arch->rope == rope_style::neox;
    const double base = local ? c_.rope_freq_base_swa : c_.rope_freq_base;
    const double scale = local ? c_.rope_freq_scale_swa : c_.rope_freq_scale();
    const bool yarn = c_.rope_scaling == rope_scaling_type::yarn;
    const double n_rot = c_.n_rot;
    auto corr_dim = [&](double beta) {  // the pair whose wavelength turns beta times over the original context
      return n_rot * std::log(c_.yarn_original_ctx() / (beta * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    const double low = std::max(0.0, std::floor(corr_dim(model_config::kYarnBetaFast)));
    const double high = std::min(n_rot - 1.0, std::ceil(corr_dim(model_config::kYarnBetaSlow)));
    const double m = c_.rope_attn_factor * (yarn ? 1.0 + 0.1 * std::log(1.0 / scale) : 1.0);
    for (uint32_t h = 0; h < n_heads; ++h) {
      for (uint32_t i = 0; i < c_.n_rot / 2; ++i) {
        const double factor = rope_factors_.empty() ? 1.0 : rope_factors_[i];
        const double unscaled = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot) / factor;
        double theta = scale * unscaled;
        if (yarn) {
          const double ramp = 1.0 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
          theta = theta * (1.0 - ramp) + unscaled * ramp;
        }
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
  std::vector<std::vector<int32_t>> last_experts_;                 // [layer][k]
  std::vector<double> last_margins_;                               // [layer]
  std::vector<double> last_hidden_;
};

}  // namespace tandem::test
