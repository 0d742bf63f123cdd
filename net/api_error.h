// An error as the OpenAI API reports it: an HTTP status and
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// `param` names the offending request field for a 400, so a client can tell what to fix.
#pragma once

#include <stdexcept>
#include <string>

namespace tandem::net {

struct api_error : std::runtime_error {
  api_error(int status_, std::string message, std::string param_ = "", std::string code_ = "")
      : std::runtime_error(std::move(message)), status(status_), param(std::move(param_)), code(std::move(code_)) {}
  int status;
  std::string param;  // empty = null
  std::string code;   // empty = null
  double retry_after_s = 0;
};

// 503 while the model loads: try again in a second.
inline api_error model_loading() {
  api_error e(503, "the model is still loading");
  e.retry_after_s = 1;
  return e;
}

// The error type OpenAI uses for `status`.
const char* error_type_for(int status);

// The JSON body for `e`.
std::string error_body(const api_error& e);

}  // namespace tandem::net
