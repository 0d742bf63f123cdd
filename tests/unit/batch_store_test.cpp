// The Batch API's store (engine/batch/batch_store.h): records survive a reopen, the upload
// check refuses what cannot be a batch, result logs cut a torn last line and know which
// custom_ids are answered (so a restart answers each exactly once), the directory lock keeps
// a second store out, and result lines have OpenAI's shape.
#include "engine/batch/batch_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "net/api_error.h"
#include "net/http/multipart_form.h"

namespace tandem::batch {
namespace {
namespace fs = std::filesystem;
namespace json = boost::json;

struct temp_dir {
  temp_dir() {
    path = fs::temp_directory_path() /
           ("batch_store_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  fs::path path;
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const char* kLine1 = R"({"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}})";
const char* kLine2 = R"({"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"x"}})";

TEST(BatchStore, RecordsSurviveAReopen) {
  temp_dir d;
  batch_record b;
  b.id = "batch_1";
  b.tenant = "alice";
  b.endpoint = "/v1/chat/completions";
  b.input_file_id = "file-in";
  b.status = batch_status::in_progress;
  b.created_at = 100;
  b.in_progress_at = 101;
  b.metadata = json::object{{"k", "v"}};
  b.counts = {3, 1, 1};
  b.output_file_id = "file-out";
  b.error_file_id = "file-err";
  {
    batch_store s(d.path);
    s.put_file(file_record{"file-in", "alice", "in.jsonl", "batch", 10, 99}, "0123456789");
    s.save_batch(b);
  }
  batch_store s(d.path);
  const auto files = s.load_files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].tenant, "alice");
  EXPECT_EQ(files[0].bytes, 10u);
  EXPECT_EQ(s.read_content("file-in"), "0123456789");
  const auto batches = s.load_batches();
  ASSERT_EQ(batches.size(), 1u);
  const auto& r = batches[0];
  EXPECT_EQ(r.tenant, "alice");
  EXPECT_EQ(r.status, batch_status::in_progress);
  EXPECT_EQ(r.in_progress_at, 101);
  EXPECT_EQ(r.output_file_id, "file-out");
  EXPECT_EQ(r.error_file_id, "file-err");
  EXPECT_EQ(r.counts.total, 3u);
  EXPECT_EQ(json::serialize(r.metadata), R"({"k":"v"})");
  EXPECT_EQ(s.skipped(), 0u);
  // No temporary files are left behind by the atomic writes.
  for (const auto& e : fs::recursive_directory_iterator(d.path)) EXPECT_NE(e.path().extension(), ".tmp");
}

TEST(BatchStore, TheClientViewHidesTheTenantAndUnfinishedOutputs) {
  batch_record b;
  b.id = "batch_1";
  b.tenant = "alice";
  b.status = batch_status::in_progress;
  b.counts = {2, 1, 0};
  b.output_file_id = "file-out";
  b.error_file_id = "file-err";
  json::object v = to_api_json(b);
  EXPECT_FALSE(v.contains("tenant"));
  EXPECT_TRUE(v.at("output_file_id").is_null());
  EXPECT_EQ(v.at("object"), "batch");
  EXPECT_EQ(v.at("status"), "in_progress");
  EXPECT_TRUE(v.at("completed_at").is_null());
  b.status = batch_status::completed;
  b.completed_at = 5;
  v = to_api_json(b);
  EXPECT_EQ(v.at("output_file_id"), "file-out");
  EXPECT_TRUE(v.at("error_file_id").is_null()) << "no failed line: no error file";
  EXPECT_EQ(v.at("request_counts").at("completed"), 1);
}

TEST(BatchStore, DamagedRecordsAreSkippedAndOrphansRemoved) {
  temp_dir d;
  {
    batch_store s(d.path);
    s.put_file(file_record{"file-ok", "t", "a.jsonl", "batch", 2, 1}, "{}");
  }
  std::ofstream(d.path / "batches" / "batch_bad.json") << "{not json";
  std::ofstream(d.path / "files" / "file-orphan.jsonl") << "x";
  std::ofstream(d.path / "files" / "file-keep.jsonl") << "x";
  batch_store s(d.path);
  EXPECT_EQ(s.load_files().size(), 1u);
  EXPECT_TRUE(s.load_batches().empty());
  EXPECT_EQ(s.skipped(), 1u);
  s.remove_orphans({"file-ok", "file-keep"});
  EXPECT_FALSE(fs::exists(d.path / "files" / "file-orphan.jsonl"));
  EXPECT_TRUE(fs::exists(d.path / "files" / "file-keep.jsonl"));
  EXPECT_TRUE(fs::exists(d.path / "files" / "file-ok.jsonl"));
}

TEST(BatchStore, ASecondStoreOnTheSameDirectoryIsRefused) {
  temp_dir d;
  batch_store first(d.path);
  EXPECT_THROW(batch_store second(d.path), std::runtime_error);
}

TEST(BatchJsonl, AGoodFileIsCountedAndBlankLinesSkipped) {
  uint32_t lines = 0;
  const std::string text = std::string(kLine1) + "\n\n" + kLine2 + "\r\n";
  EXPECT_FALSE(check_batch_jsonl(text, 10, lines));
  EXPECT_EQ(lines, 2u);
  const auto spans = index_lines(text);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(text.substr(spans[1].offset, spans[1].length), kLine2);
}

TEST(BatchJsonl, BadFilesAreRefusedWithTheirLine) {
  uint32_t lines = 0;
  auto problem = check_batch_jsonl("this is not json\n", 10, lines);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->line, 1);
  problem = check_batch_jsonl(std::string(kLine1) + "\n[1,2]\n", 10, lines);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->line, 2);
  problem = check_batch_jsonl(std::string(kLine1) + "\n" + kLine1 + "\n", 10, lines);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->message.find("repeats custom_id"), std::string::npos);
  problem = check_batch_jsonl(R"({"method":"POST"})", 10, lines);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->message.find("custom_id"), std::string::npos);
  problem = check_batch_jsonl(std::string(kLine1) + "\n" + kLine2 + "\n", 1, lines);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->message.find("more than 1"), std::string::npos);
  EXPECT_TRUE(check_batch_jsonl("\n  \n", 10, lines)) << "no requests at all";
  EXPECT_TRUE(check_batch_jsonl(std::string(200, '[') + "\n", 10, lines)) << "nesting is bounded";
}

TEST(BatchJsonl, LinesThatCannotRunSayWhy) {
  const auto ok = read_input_line(kLine1, "/v1/chat/completions");
  EXPECT_EQ(ok.custom_id, "a");
  EXPECT_TRUE(ok.error_code.empty());
  EXPECT_EQ(ok.body, R"({"messages":[]})");
  EXPECT_EQ(read_input_line(kLine2, "/v1/chat/completions").error_code, "invalid_url");
  EXPECT_EQ(read_input_line(R"({"custom_id":"c","method":"GET","url":"/v1/completions","body":{}})", "/v1/completions")
                .error_code,
            "invalid_method");
  EXPECT_EQ(
      read_input_line(R"({"custom_id":"c","method":"POST","url":"/v1/completions","body":"x"})", "/v1/completions")
          .error_code,
      "invalid_request");
}

TEST(ResultLog, ATornLastLineIsCutAndAnsweredIdsAreKnown) {
  temp_dir d;
  const fs::path p = d.path / "out.jsonl";
  {
    result_log log(p);
    log.append(response_line("batch_req_1", "a", 200, "chatcmpl-1", R"({"ok":true})"), "a");
    log.append(error_line("batch_req_2", "b", "invalid_url", "no"), "b");
    EXPECT_EQ(log.lines(), 2u);
  }
  const std::string whole = read(p);
  // A crash in the middle of the third append.
  std::ofstream(p, std::ios::app) << R"({"id":"batch_req_3","custom_id":"c","resp)";
  result_log log(p);
  EXPECT_EQ(log.lines(), 2u);
  EXPECT_TRUE(log.answered().contains("a"));
  EXPECT_TRUE(log.answered().contains("b"));
  EXPECT_FALSE(log.answered().contains("c"));
  EXPECT_EQ(read(p), whole) << "the torn line is gone from the file too";
  log.append(response_line("batch_req_3", "c", 200, "chatcmpl-3", "{}"), "c");
  EXPECT_EQ(log.bytes(), read(p).size());
  result_log again(p);
  EXPECT_EQ(again.lines(), 3u);
}

TEST(ResultLog, LinesHaveOpenAIsShape) {
  const json::value v = json::parse(response_line("batch_req_1", "a", 200, "chatcmpl-1", R"({"id":"chatcmpl-1"})"));
  EXPECT_EQ(v.at("custom_id"), "a");
  EXPECT_EQ(v.at("response").at("status_code"), 200);
  EXPECT_EQ(v.at("response").at("request_id"), "chatcmpl-1");
  EXPECT_EQ(v.at("response").at("body").at("id"), "chatcmpl-1");
  EXPECT_TRUE(v.at("error").is_null());
  const json::value e = json::parse(error_line("batch_req_2", "b", "invalid_url", "bad url"));
  EXPECT_TRUE(e.at("response").is_null());
  EXPECT_EQ(e.at("error").at("code"), "invalid_url");
}

TEST(MultipartForm, TheSdksUploadIsRead) {
  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
      "Content-Type: application/jsonl\r\n\r\n{\"a\":1}\n{\"b\":2}\n\r\n--XyZ--\r\n";
  const auto parts = net::parse_multipart("multipart/form-data; boundary=XyZ", body);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "purpose");
  EXPECT_EQ(parts[0].data, "batch");
  EXPECT_EQ(parts[1].name, "file");
  EXPECT_EQ(parts[1].filename, "in.jsonl");
  EXPECT_EQ(parts[1].data, "{\"a\":1}\n{\"b\":2}\n");
}

TEST(MultipartForm, MalformedFormsAre400s) {
  EXPECT_THROW(net::parse_multipart("application/json", "{}"), net::api_error);
  EXPECT_THROW(net::parse_multipart("multipart/form-data", "x"), net::api_error) << "no boundary";
  EXPECT_THROW(net::parse_multipart("multipart/form-data; boundary=B", "--B\r\nno end"), net::api_error);
  std::string many;
  for (int i = 0; i < 20; ++i) many += "--B\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nv\r\n";
  many += "--B--";
  EXPECT_THROW(net::parse_multipart("multipart/form-data; boundary=B", many), net::api_error) << "parts bounded";
}

}  // namespace
}  // namespace tandem::batch
