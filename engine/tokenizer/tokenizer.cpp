#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer_data.h"

namespace tandem {
namespace {

// A piece of the input: either text still to tokenize or a special token cut out of it.
struct fragment {
  token_id token;  // kNoToken for text
  size_t offset;   // text: bytes [offset, offset + length) of the input
  size_t length;
};

// Cuts the occurrences of special tokens out of `text`, longest token first, leftmost
// occurrence first within each remaining text fragment. Control and unknown tokens only
// when `parse_special`; user-defined tokens always (as llama.cpp does).
void partition_specials(const tokenizer_data& d, std::string_view text, bool parse_special,
                        std::vector<fragment>& out) {
  out.clear();
  if (text.empty()) return;
  out.push_back({kNoToken, 0, text.size()});
  std::vector<fragment> next;
  for (token_id id : d.specials_longest_first) {
    const uint8_t attrs = d.attrs[static_cast<size_t>(id)];
    if (!parse_special && (attrs & (token_attr::kControl | token_attr::kUnknown))) continue;
    const std::string& special = d.texts[static_cast<size_t>(id)];
    bool found_any = false;
    next.clear();
    for (const fragment& f : out) {
      if (f.token != kNoToken || f.length < special.size()) {
        next.push_back(f);
        continue;
      }
      const std::string_view region = text.substr(f.offset, f.length);
      size_t start = 0;
      for (size_t hit = region.find(special); hit != std::string_view::npos; hit = region.find(special, start)) {
        found_any = true;
        if (hit > start) next.push_back({kNoToken, f.offset + start, hit - start});
        next.push_back({id, 0, 0});
        start = hit + special.size();
      }
      if (start < f.length) next.push_back({kNoToken, f.offset + start, f.length - start});
    }
    if (found_any) out.swap(next);
  }
}

void require_token(const tokenizer_data& d, token_id id, const char* what) {
  if (!d.has(id)) {
    throw std::runtime_error(std::string("the model asks for a ") + what + " token but defines none");
  }
}

}  // namespace

tokenizer tokenizer::from_gguf(const gguf::file& f) {
  std::shared_ptr<tokenizer_data> d = load_tokenizer_data(f);
  if (d->model == tokenizer_data::kind::bpe) {
    const gguf::array_value* merges = f.get_array("tokenizer.ggml.merges");
    if (merges == nullptr) {
      throw std::runtime_error(
          "the byte-level BPE vocabulary has no merges: metadata key "
          "tokenizer.ggml.merges is missing");
    }
    if (merges->elem_type != gguf::value_type::string) {
      throw gguf::format_error("tokenizer.ggml.merges must be an array of strings");
    }
    std::vector<std::string> lines;
    lines.reserve(merges->items.size());
    for (const auto& v : merges->items) lines.push_back(*v.as_string());
    d->bpe = std::make_unique<bpe_model>(d->texts, d->id_of_text, lines, d->pre->ignore_merges());
  } else if (d->model == tokenizer_data::kind::wpm) {
    d->wpm = std::make_unique<wordpiece_model>(d->texts, d->id_of_text, d->unk, d->lowercase, d->strip_accents);
  } else {
    d->spm = std::make_unique<spm_model>(d->scores, d->id_of_text, d->unk);
  }
  return tokenizer(std::move(d));
}

std::vector<token_id> tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const tokenizer_data& d = *data_;
  std::vector<token_id> out;
  out.reserve(text.size() / 3 + 2);
  thread_local std::vector<fragment> fragments;
  partition_specials(d, text, parse_special, fragments);

  if (add_special && d.add_bos) {
    require_token(d, d.bos, "BOS");
    out.push_back(d.bos);
  }
  if (d.model == tokenizer_data::kind::bpe) {
    thread_local pretokenized words;
    for (const fragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        continue;
      }
      d.pre->split(text.substr(f.offset, f.length), words);
      for (size_t i = 0; i < words.size(); ++i) d.bpe->encode_word(words.word(i), out);
    }
  } else if (d.model == tokenizer_data::kind::wpm) {
    for (const fragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
      } else {
        d.wpm->encode(text.substr(f.offset, f.length), out);
      }
    }
  } else {
    // SentencePiece: spaces become ▁, and text at the start or right after a special token
    // gets a leading space when add_space_prefix.
    bool after_special = true;
    std::string escaped;
    for (const fragment& f : fragments) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (d.add_space_prefix && after_special) escaped += "\xE2\x96\x81";
      for (char c : text.substr(f.offset, f.length)) {
        if (c == ' ') {
          escaped += "\xE2\x96\x81";
        } else {
          escaped.push_back(c);
        }
      }
      d.spm->encode(escaped, out);
      after_special = false;
    }
  }
  if (add_special && d.add_sep) {
    require_token(d, d.sep, "separator");
    out.push_back(d.sep);
  }
  if (add_special && d.add_eos) {
    require_token(d, d.eos, "EOS");
    out.push_back(d.eos);
  }
  return out;
}

std::string tokenizer::decode(std::span<const token_id> ids, bool render_special) const {
  std::string out;
  for (token_id id : ids) out += piece(id, render_special);
  return out;
}

const std::string& tokenizer::piece(token_id id) const {
  if (!data_->has(id)) throw std::out_of_range("token id " + std::to_string(id) + " is out of range");
  return data_->pieces[static_cast<size_t>(id)];
}

std::string_view tokenizer::piece(token_id id, bool render_special) const {
  const std::string& p = piece(id);
  if (!render_special && (data_->attrs[static_cast<size_t>(id)] & (token_attr::kControl | token_attr::kUnknown))) {
    return {};
  }
  return p;
}

size_t tokenizer::vocab_size() const { return data_->texts.size(); }
token_id tokenizer::bos() const { return data_->bos; }
token_id tokenizer::eos() const { return data_->eos; }
std::optional<token_id> tokenizer::eot() const {
  if (data_->eot == kNoToken) return std::nullopt;
  return data_->eot;
}
bool tokenizer::add_bos() const { return data_->add_bos; }
bool tokenizer::add_eos() const { return data_->add_eos; }
std::string_view tokenizer::model_name() const { return data_->model_name; }
std::string_view tokenizer::pre_name() const { return data_->pre_name; }
bool tokenizer::adds_space_prefix() const { return data_->add_space_prefix; }

uint8_t tokenizer::attributes(token_id id) const {
  if (!data_->has(id)) throw std::out_of_range("token id " + std::to_string(id) + " is out of range");
  return data_->attrs[static_cast<size_t>(id)];
}

bool tokenizer::is_control(token_id id) const {
  return data_->has(id) && (data_->attrs[static_cast<size_t>(id)] & token_attr::kControl) != 0;
}

bool tokenizer::is_end_of_generation(token_id id) const {
  const auto& eog = data_->end_of_generation;
  return std::binary_search(eog.begin(), eog.end(), id);
}

const std::vector<token_id>& tokenizer::end_of_generation_ids() const { return data_->end_of_generation; }

const std::string& tokenizer::token_text(token_id id) const {
  if (!data_->has(id)) throw std::out_of_range("token id " + std::to_string(id) + " is out of range");
  return data_->texts[static_cast<size_t>(id)];
}

std::optional<token_id> tokenizer::find_token(std::string_view text) const {
  auto it = data_->id_of_text.find(text);
  if (it == data_->id_of_text.end()) return std::nullopt;
  return it->second;
}

}  // namespace tandem
