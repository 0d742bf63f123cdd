// Encode throughput of the tokenizer on one thread, on English prose.
//
//   tokenizer_bench [--model PATH|default] [--text FILE] [--mb N]
//
// Without --text the prose is the built-in passage below, repeated to N MB (default 8).
// Prints MB/s (1 MB = 10^6 bytes of input) for encode, and for decode of the result.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

constexpr const char* kProse =
    "It was a bright cold day in April, and the clocks on the old town hall were striking "
    "thirteen. Nobody in the market square paid them much attention; the baker was arguing "
    "with a customer about the price of rye bread, two boys were chasing a dog between the "
    "stalls, and an elderly woman sat on the fountain's edge, reading yesterday's newspaper "
    "with the patience of someone who had nowhere else to be.\n\n"
    "The river that ran through the valley had flooded twice that winter. Each time, the "
    "farmers had moved their animals to higher ground and waited, and each time the water had "
    "receded, leaving behind a layer of dark, fertile silt. \"It's a blessing and a curse,\" "
    "said Thomas, who had farmed the same fields for forty-three years. \"You lose a season, "
    "but the next one makes up for it.\" He didn't sound entirely convinced.\n\n"
    "Scientists have long debated whether language shapes thought or merely reflects it. "
    "Early experiments suggested that speakers of languages with many words for colours could "
    "distinguish shades more quickly, although later studies found the effect to be small and "
    "dependent on the task. What seems clear is that vocabulary guides attention: we notice "
    "what we can name, and we remember what we can describe.\n\n"
    "By the time the train reached the coast, the rain had stopped. Passengers gathered their "
    "coats and umbrellas, checked their tickets one last time, and stepped out onto a platform "
    "that smelled of salt and diesel. Somewhere beyond the station, gulls were calling over the "
    "harbour, and the first fishing boats of the evening were heading out to sea.\n\n";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_spec = "default";
  std::string text_file;
  double megabytes = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--model") == 0)
      model_spec = argv[i + 1];
    else if (std::strcmp(argv[i], "--text") == 0)
      text_file = argv[i + 1];
    else if (std::strcmp(argv[i], "--mb") == 0)
      megabytes = std::atof(argv[i + 1]);
  }
  try {
    const auto tok = tandem::tokenizer::from_gguf(tandem::gguf::file::open(tandem::resolve_model_path(model_spec)));
    std::string base = kProse;
    if (!text_file.empty()) {
      std::ifstream in(text_file, std::ios::binary);
      if (!in) throw std::runtime_error("cannot read " + text_file);
      std::stringstream ss;
      ss << in.rdbuf();
      base = ss.str();
    }
    std::string text;
    const auto target = static_cast<size_t>(megabytes * 1e6);
    while (text.size() < target) text += base;

    std::vector<double> encode_rates;
    std::vector<tandem::token_id> ids;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      ids = tok.encode(text, false, false);
      encode_rates.push_back(static_cast<double>(text.size()) / 1e6 / seconds_since(t0));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::string back = tok.decode(ids);
    const double decode_rate = static_cast<double>(back.size()) / 1e6 / seconds_since(t0);
    std::sort(encode_rates.begin(), encode_rates.end());
    std::printf("tokenizer_bench: %s (%s), %.1f MB of text, %zu tokens (%.2f bytes/token)\n",
                std::string(tok.model_name()).c_str(), std::string(tok.pre_name()).c_str(),
                static_cast<double>(text.size()) / 1e6, ids.size(),
                static_cast<double>(text.size()) / static_cast<double>(ids.size()));
    std::printf("encode: %.1f MB/s (median of 5, one thread; best %.1f)\n", encode_rates[2], encode_rates.back());
    std::printf("decode: %.1f MB/s\n", decode_rate);
    // SentencePiece vocabularies put a space before the text (add_space_prefix).
    const bool round_trip = back == text || (tok.model_name() == "llama" && back == " " + text);
    if (!round_trip) {
      std::fprintf(stderr, "decode(encode(text)) != text\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
