// multipart/form-data request bodies (RFC 7578), as the openai SDK uploads a file
// (POST /v1/files: a "purpose" field and a "file" part). Plain C++; the parts are views into
// the body, so a large upload is not copied while it is read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::net {

struct form_part {
  std::string name;      // Content-Disposition's name
  std::string filename;  // its filename ("" = a plain field)
  std::string_view data;
};

// The parts of `body`, whose Content-Type header is `content_type` (it names the boundary).
// Throws api_error 400 for anything that is not a well-formed form, or one of more than
// `max_parts` parts.
std::vector<form_part> parse_multipart(std::string_view content_type, std::string_view body, size_t max_parts = 16);

}  // namespace tandem::net
