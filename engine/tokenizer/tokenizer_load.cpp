// Reading a tokenizer from GGUF metadata, with llama.cpp's defaults and its recognition of
// special tokens by their text.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/byte_encoding.h"
#include "engine/tokenizer/tokenizer_data.h"
#include "engine/tokenizer/utf8.h"

namespace tandem {
namespace {

using namespace std::string_view_literals;

// GGUF token types (tokenizer.ggml.token_type).
enum gguf_token_type : int64_t {
  kTypeUndefined = 0,
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

uint8_t attrs_of_type(int64_t type) {
  switch (type) {
    case kTypeNormal:
      return token_attr::kNormal;
    case kTypeUnknown:
      return token_attr::kUnknown;
    case kTypeControl:
      return token_attr::kControl;
    case kTypeUserDefined:
      return token_attr::kUserDefined;
    case kTypeUnused:
      return token_attr::kUnused;
    case kTypeByte:
      return token_attr::kByte;
    default:
      return 0;  // undefined: rendered as nothing, never split out as special
  }
}

// Texts by which llama.cpp recognises special tokens that the metadata does not name, in
// the order of its lists (when several are present, Tandem takes the first of the list).
constexpr std::array kEndOfTurnTexts = {
    "<|eot_id|>"sv, "<|im_end|>"sv, "<|end|>"sv, "<end_of_turn>"sv,         "<|endoftext|>"sv,      "<|end_of_text|>"sv,
    "<EOT>"sv,      "_<EOT>"sv,     "[EOT]"sv,   "<｜end▁of▁sentence｜>"sv, "<end_of_utterance>"sv,
};
constexpr std::array kEndOfMessageTexts = {"<|eom_id|>"sv};
constexpr std::array kFimPrefixTexts = {
    "<|fim_prefix|>"sv, "<fim-prefix>"sv, "<fim_prefix>"sv,    "<｜fim▁begin｜>"sv,
    "<PRE>"sv,          "▁<PRE>"sv,       "<|code_prefix|>"sv, "<|prefix|>"sv,
};
constexpr std::array kFimSuffixTexts = {
    "<|fim_suffix|>"sv, "<fim-suffix>"sv, "<fim_suffix>"sv,    "<｜fim▁hole｜>"sv,
    "<SUF>"sv,          "▁<SUF>"sv,       "<|code_suffix|>"sv, "<|suffix|>"sv,
};
constexpr std::array kFimMiddleTexts = {
    "<|fim_middle|>"sv, "<fim-middle>"sv, "<fim_middle>"sv,    "<｜fim▁end｜>"sv,
    "<MID>"sv,          "▁<MID>"sv,       "<|code_middle|>"sv, "<|middle|>"sv,
};
constexpr std::array kFimPadTexts = {
    "<|fim_pad|>"sv, "<fim-pad>"sv, "<fim_pad>"sv, "<PAD>"sv, "[PAD]"sv,
};
constexpr std::array kFimRepoTexts = {
    "<|fim_repo|>"sv, "<|repo_name|>"sv, "<fim-repo>"sv, "<REPO>"sv, "<reponame>"sv,
};
constexpr std::array kFimSeparatorTexts = {"<|file_sep|>"sv};
// Tokens that end generation wherever they are, by text.
constexpr std::array kEndOfGenerationTexts = {
    "<|eot_id|>"sv,
    "<|im_end|>"sv,
    "<|end|>"sv,
    "<|return|>"sv,
    "<|call|>"sv,
    "<|flush|>"sv,
    "<|calls|>"sv,
    "<end_of_turn>"sv,
    "<|endoftext|>"sv,
    "</s>"sv,
    "<|eom_id|>"sv,
    "<EOT>"sv,
    "_<EOT>"sv,
    "[EOT]"sv,
    "[EOS]"sv,
    "<|end_of_text|>"sv,
    "<end_of_utterance>"sv,
    "<eos>"sv,
    "<turn|>"sv,
    "<|tool_response>"sv,
    "<｜end▁of▁sentence｜>"sv,
    "[e~["sv,
};
// gpt-oss markers that llama.cpp always renders (user-defined, not control).
constexpr std::array kAlwaysRenderedTexts = {
    "<|channel|>"sv,
    "<|message|>"sv,
    "<|start|>"sv,
    "<|constrain|>"sv,
};

const gguf::array_value& required_array(const gguf::file& f, std::string_view key) {
  const gguf::array_value* a = f.get_array(key);
  if (a == nullptr) {
    throw std::runtime_error("the model file has no tokenizer vocabulary: metadata key " + std::string(key) +
                             " is missing");
  }
  return *a;
}

void check_array_size(const gguf::array_value& a, std::string_view key, size_t n_tokens) {
  if (a.items.size() < n_tokens) {
    throw gguf::format_error(std::string(key) + " has " + std::to_string(a.items.size()) + " entries, fewer than the " +
                             std::to_string(n_tokens) + " tokens");
  }
}

// A special id from the metadata: the key's value when it names a token, else the default
// (which itself is dropped when out of range), as llama.cpp does.
token_id special_id(const gguf::file& f, std::string_view key, token_id fallback, size_t n) {
  if (fallback >= 0 && static_cast<size_t>(fallback) >= n) fallback = kNoToken;
  const auto v = f.get_int(key);
  if (!v || *v < 0 || static_cast<uint64_t>(*v) >= n) return fallback;
  return static_cast<token_id>(*v);
}

template <size_t N>
token_id first_present(const tokenizer_data& d, const std::array<std::string_view, N>& texts) {
  for (std::string_view t : texts) {
    if (auto it = d.id_of_text.find(t); it != d.id_of_text.end()) return it->second;
  }
  return kNoToken;
}

// The bytes a token stands for, control tokens rendered as their text.
std::string piece_of(const tokenizer_data& d, token_id id) {
  const std::string& text = d.texts[static_cast<size_t>(id)];
  const uint8_t a = d.attrs[static_cast<size_t>(id)];
  if (a & (token_attr::kUnknown | token_attr::kControl | token_attr::kUserDefined)) return text;
  if (a & token_attr::kNormal) {
    if (d.model != tokenizer_data::kind::bpe) {  // SentencePiece, WordPiece
      std::string out;
      for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, 3, "\xE2\x96\x81") == 0) {  // ▁ stands for a space
          out.push_back(' ');
          pos += 3;
        } else {
          out.push_back(text[pos++]);
        }
      }
      return out;
    }
    // Byte-level text: each code point is one byte. A code point outside the alphabet is
    // rendered the way llama.cpp renders it.
    std::string out;
    for (size_t pos = 0; pos < text.size();) {
      const auto dec = utf8::decode_lenient(text, pos);
      pos += dec.length;
      if (auto b = byte_encoding::byte_of(dec.cp)) {
        out.push_back(static_cast<char>(*b));
      } else {
        out += "[UNK_BYTE_0x";
        for (unsigned char c : utf8::encode(dec.cp)) {
          char hex[3];
          std::snprintf(hex, sizeof hex, "%02x", c);
          out += hex;
        }
        out += text + "]";
      }
    }
    return out;
  }
  if (a & token_attr::kByte) {
    // "<0xXX>"
    const std::string hex = text.size() >= 5 ? text.substr(3, 2) : std::string();
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return {};  // undefined and unused tokens render as nothing
}

}  // namespace

std::shared_ptr<tokenizer_data> load_tokenizer_data(const gguf::file& f) {
  auto d = std::make_shared<tokenizer_data>();
  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) {
    throw std::runtime_error(
        "the model file has no tokenizer: metadata key tokenizer.ggml.model "
        "is missing");
  }
  d->model_name = *model;
  d->pre_name = f.get_string("tokenizer.ggml.pre").value_or("");

  token_id default_bos = kNoToken, default_eos = kNoToken, default_unk = kNoToken;
  if (d->model_name == "gpt2") {
    d->model = tokenizer_data::kind::bpe;
    if (d->pre_name.empty()) {
      throw std::runtime_error(
          "tokenizer.ggml.pre is missing: the pre-tokenizer of this byte-level BPE vocabulary "
          "is unknown (llama.cpp would fall back to a generic one; reconvert the model)");
    }
    d->pre = pretokenizer::by_name(d->pre_name);
    d->add_bos = d->pre->adds_bos_by_default();
    // llama.cpp's defaults for "gpt2" vocabularies when the ids are not in the file.
    default_bos = 11;
    default_eos = 11;
  } else if (d->model_name == "llama") {
    d->model = tokenizer_data::kind::spm;
    d->add_bos = true;
    d->add_space_prefix = true;
    default_bos = 1;
    default_eos = 2;
    default_unk = 0;
  } else if (d->model_name == "bert") {
    // llama.cpp's defaults for a BERT vocabulary: [CLS] 101 as BOS, [UNK] 100, [SEP] 102
    // after the text; the normaliser lower-cases and strips accents unless told otherwise.
    d->model = tokenizer_data::kind::wpm;
    d->add_bos = true;
    d->add_sep = true;
    default_bos = 101;
    default_unk = 100;
    d->lowercase = f.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
    d->strip_accents = f.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(d->lowercase);
  } else {
    throw std::runtime_error("unsupported tokenizer model '" + d->model_name +
                             "' (tokenizer.ggml.model); supported: gpt2 (byte-level BPE), "
                             "llama (SentencePiece BPE), bert (WordPiece)");
  }
  if (auto v = f.get_bool("tokenizer.ggml.add_space_prefix")) d->add_space_prefix = *v;

  // Vocabulary.
  const auto& tokens = required_array(f, "tokenizer.ggml.tokens");
  if (tokens.elem_type != gguf::value_type::string) {
    throw gguf::format_error("tokenizer.ggml.tokens must be an array of strings");
  }
  const size_t n = tokens.items.size();
  if (n == 0) throw gguf::format_error("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) throw gguf::format_error("tokenizer.ggml.tokens is too long");
  d->texts.resize(n);
  d->scores.assign(n, 0.0f);
  d->attrs.assign(n, token_attr::kNormal);
  d->id_of_text.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string* s = tokens.items[i].as_string();
    d->texts[i] = (s == nullptr || s->empty()) ? "[EMPTY_" + std::to_string(i) + "]" : *s;
    d->id_of_text[d->texts[i]] = static_cast<token_id>(i);
  }
  if (const auto* scores = f.get_array("tokenizer.ggml.scores")) {
    if (scores->elem_type != gguf::value_type::float32 && scores->elem_type != gguf::value_type::int32) {
      throw gguf::format_error("tokenizer.ggml.scores must be an array of float32 or int32");
    }
    check_array_size(*scores, "tokenizer.ggml.scores", n);
    for (size_t i = 0; i < n; ++i) d->scores[i] = static_cast<float>(scores->items[i].as_float().value_or(0));
  }
  if (const auto* types = f.get_array("tokenizer.ggml.token_type")) {
    if (types->elem_type != gguf::value_type::int32) {
      throw gguf::format_error("tokenizer.ggml.token_type must be an array of int32");
    }
    check_array_size(*types, "tokenizer.ggml.token_type", n);
    for (size_t i = 0; i < n; ++i) d->attrs[i] = attrs_of_type(types->items[i].as_int().value_or(0));
  }

  // Special ids and flags.
  d->bos = special_id(f, "tokenizer.ggml.bos_token_id", default_bos, n);
  d->eos = special_id(f, "tokenizer.ggml.eos_token_id", default_eos, n);
  d->eot = special_id(f, "tokenizer.ggml.eot_token_id", kNoToken, n);
  d->unk = special_id(f, "tokenizer.ggml.unknown_token_id", default_unk, n);
  token_id eom = special_id(f, "tokenizer.ggml.eom_token_id", kNoToken, n);
  token_id fim_pre = special_id(f, "tokenizer.ggml.fim_pre_token_id", kNoToken, n);
  fim_pre = special_id(f, "tokenizer.ggml.prefix_token_id", fim_pre, n);
  token_id fim_suf = special_id(f, "tokenizer.ggml.fim_suf_token_id", kNoToken, n);
  fim_suf = special_id(f, "tokenizer.ggml.suffix_token_id", fim_suf, n);
  token_id fim_mid = special_id(f, "tokenizer.ggml.fim_mid_token_id", kNoToken, n);
  fim_mid = special_id(f, "tokenizer.ggml.middle_token_id", fim_mid, n);
  token_id fim_pad = special_id(f, "tokenizer.ggml.fim_pad_token_id", kNoToken, n);
  token_id fim_rep = special_id(f, "tokenizer.ggml.fim_rep_token_id", kNoToken, n);
  token_id fim_sep = special_id(f, "tokenizer.ggml.fim_sep_token_id", kNoToken, n);
  if (auto v = f.get_bool("tokenizer.ggml.add_bos_token")) d->add_bos = *v;
  if (d->model == tokenizer_data::kind::wpm) {
    d->sep = special_id(f, "tokenizer.ggml.seperator_token_id", 102, n);  // llama.cpp's spelling
    if (auto v = f.get_bool("tokenizer.ggml.add_sep_token")) d->add_sep = *v;
    if (d->unk == kNoToken) throw gguf::format_error("a WordPiece vocabulary needs an unknown token ([UNK])");
  }
  if (auto v = f.get_bool("tokenizer.ggml.add_eos_token")) d->add_eos = *v;

  // Special tokens recognised by text become control tokens.
  const auto make_control = [&](token_id id) {
    if (id >= 0) d->attrs[static_cast<size_t>(id)] |= token_attr::kControl;
  };
  const auto detect = [&](token_id& id, const auto& texts) {
    if (id == kNoToken) {
      id = first_present(*d, texts);
      make_control(id);
    }
  };
  detect(d->eot, kEndOfTurnTexts);
  detect(eom, kEndOfMessageTexts);
  detect(fim_pre, kFimPrefixTexts);
  detect(fim_suf, kFimSuffixTexts);
  detect(fim_mid, kFimMiddleTexts);
  detect(fim_pad, kFimPadTexts);
  detect(fim_rep, kFimRepoTexts);
  detect(fim_sep, kFimSeparatorTexts);

  // Control tokens whose text says "unused" are unused.
  for (size_t i = 0; i < n; ++i) {
    if ((d->attrs[i] & token_attr::kControl) && d->texts[i].find("unused") != std::string::npos) {
      d->attrs[i] |= token_attr::kUnused;
    }
  }

  // End of generation.
  std::vector<token_id> eog;
  for (token_id id : {fim_pad, fim_rep, fim_sep}) {
    if (id >= 0) eog.push_back(id);
  }
  for (std::string_view t : kEndOfGenerationTexts) {
    if (auto it = d->id_of_text.find(t); it != d->id_of_text.end()) {
      eog.push_back(it->second);
      make_control(it->second);
    }
  }
  for (std::string_view t : kAlwaysRenderedTexts) {
    if (auto it = d->id_of_text.find(t); it != d->id_of_text.end()) {
      d->attrs[static_cast<size_t>(it->second)] = token_attr::kUserDefined;
    }
  }
  for (token_id id : {d->eos, d->eot, eom}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  const auto text_of = [&](token_id id) -> const std::string& { return d->texts[static_cast<size_t>(id)]; };
  const auto eog_with_text = [&](std::string_view t) {
    return std::find_if(eog.begin(), eog.end(), [&](token_id id) { return text_of(id) == t; });
  };
  // gpt-oss / solar-open: "<|end|>" ends a message, not the generation.
  if (auto end = eog_with_text("<|end|>"); end != eog.end()) {
    const bool has_return = eog_with_text("<|return|>") != eog.end();
    const bool has_call = eog_with_text("<|call|>") != eog.end() || eog_with_text("<|calls|>") != eog.end();
    const bool has_flush = eog_with_text("<|flush|>") != eog.end();
    if ((has_return && has_call) || (has_call && has_flush)) {
      d->attrs[static_cast<size_t>(*end)] = token_attr::kUserDefined;
      eog.erase(end);
    }
  }
  // Gemma 4 / PLaMo 2: "</s>" is a normal token there.
  if (auto s = eog_with_text("</s>"); s != eog.end()) {
    if (eog_with_text("<|tool_response>") != eog.end() || eog_with_text("<|plamo:eos|>") != eog.end()) {
      d->attrs[static_cast<size_t>(*s)] = token_attr::kNormal;
      eog.erase(s);
    }
  }
  d->end_of_generation = std::move(eog);

  // Special tokens in the order they are cut out of text: longest first (ties by id).
  for (size_t i = 0; i < n; ++i) {
    if (d->attrs[i] & (token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown)) {
      d->specials_longest_first.push_back(static_cast<token_id>(i));
    }
  }
  std::stable_sort(d->specials_longest_first.begin(), d->specials_longest_first.end(),
                   [&](token_id a, token_id b) { return text_of(a).size() > text_of(b).size(); });

  d->pieces.resize(n);
  for (size_t i = 0; i < n; ++i) d->pieces[i] = piece_of(*d, static_cast<token_id>(i));
  return d;
}

}  // namespace tandem
