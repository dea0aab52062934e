// The HTTP/1.1 pieces of berth's server without sockets: request heads, chunked framing, and
// bounded gzip decoding (extender/http_wire.h).
#include "extender/http_wire.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

namespace berth::extender::http {
namespace {

struct Parsed {
  HeadParse result;
  RequestHead head;
  WireError error;
};

Parsed Parse(std::string_view in, size_t max_bytes = 4096, uint64_t max_body = 1000) {
  Parsed p;
  p.result = ParseRequestHead(in, max_bytes, max_body, &p.head, &p.error);
  return p;
}

TEST_CASE("http wire: a request head is parsed once its blank line arrives") {
  const std::string req =
      "POST /scheduler/filter?format=text&pod=ml%2Feval HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\ncontent-length: 12\r\nConnection: keep-alive\r\n\r\n{\"a\":1}";
  for (size_t n = 0; n < req.find("\r\n\r\n") + 4; ++n) {
    INFO(n);
    CHECK(Parse(req.substr(0, n)).result == HeadParse::kIncomplete);
  }
  const Parsed p = Parse(req);
  REQUIRE(p.result == HeadParse::kComplete);
  CHECK(p.head.method == "POST");
  CHECK(p.head.path == "/scheduler/filter");
  CHECK(QueryParam(p.head.query, "format") == "text");
  CHECK(QueryParam(p.head.query, "pod") == "ml/eval");
  CHECK(QueryParam(p.head.query, "missing") == "");
  CHECK(p.head.content_length == 12u);
  CHECK(p.head.keep_alive);
  CHECK(p.head.head_bytes == req.find("{"));
  // Bare LF line ends, and empty lines before the request line.
  const Parsed lf = Parse("\r\n\nGET /healthz HTTP/1.0\nConnection: keep-alive\n\n");
  REQUIRE(lf.result == HeadParse::kComplete);
  CHECK(lf.head.minor_version == 0);
  CHECK(lf.head.keep_alive);
  CHECK_FALSE(Parse("GET / HTTP/1.0\r\n\r\n").head.keep_alive);
  CHECK_FALSE(Parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").head.keep_alive);
  CHECK(Parse("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 7, 7\r\n\r\n").head.content_length == 7u);
}

TEST_CASE("http wire: malformed or refused heads name the status to answer") {
  struct Case {
    std::string head;
    int status;
  };
  for (const Case& k : std::vector<Case>{
           {"GET / HTTP/1.1\r\n\r\n", 400},  // no Host
           {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400},
           {"GET /  HTTP/1.1\r\nHost: x\r\n\r\n", 400},
           {"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
           {"G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", 413},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n", 413},
           {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
           {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
           {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip, gzip\r\n\r\n", 415},
           {"POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\n\r\n", 415},
           {"POST / HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n", 417},
       }) {
    INFO(k.head);
    const Parsed p = Parse(k.head);
    REQUIRE(p.result == HeadParse::kError);
    CHECK(p.error.status == k.status);
    CHECK_FALSE(p.error.message.empty());
  }
  // Size limits: the request line alone (414), the whole head (431), also before it is complete.
  CHECK(Parse("GET /" + std::string(100, 'a'), 50).error.status == 414);
  CHECK(Parse("GET / HTTP/1.1\r\nX: " + std::string(100, 'a'), 50).error.status == 431);
  CHECK(Parse("GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(100, 'a') + "\r\n\r\n", 50).error.status == 431);
}

/// Decodes `in` fed `piece` bytes at a time (the caller keeps what the decoder did not take).
std::string Dechunk(std::string_view in, size_t piece, ChunkedDecoder::Step* last) {
  ChunkedDecoder d;
  std::string out, pending;
  for (size_t off = 0; off < in.size() || !pending.empty();) {
    if (off < in.size()) {
      pending.append(in.substr(off, piece));
      off += piece;
    }
    size_t pos = 0;
    for (;;) {
      size_t used = 0;
      std::string_view data;
      *last = d.Next(std::string_view(pending).substr(pos), &used, &data);
      pos += used;
      if (*last != ChunkedDecoder::Step::kData) break;
      // Take at most 3 bytes at a time, as a caller short of room would.
      const size_t take = std::min<size_t>(3, data.size());
      out.append(data.substr(0, take));
      d.Took(take);
      pos += take;
    }
    pending.erase(0, pos);
    if (*last == ChunkedDecoder::Step::kDone || *last == ChunkedDecoder::Step::kError) break;
    if (off >= in.size() && *last == ChunkedDecoder::Step::kNeedMore) break;
  }
  return out;
}

TEST_CASE("http wire: chunked framing decodes in any pieces and refuses malformed sizes") {
  const std::string body = "5;name=value\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, body.size()}) {
    INFO(piece);
    ChunkedDecoder::Step last;
    CHECK(Dechunk(body, piece, &last) == "helloabcdefghijklmnopqrstuvwxyz");
    CHECK(last == ChunkedDecoder::Step::kDone);
  }
  for (const std::string bad : {"x\r\n", "5\r\nhelloXX", "1234567890123456\r\n", "\r\n", "5 6\r\n"}) {
    INFO(bad);
    ChunkedDecoder::Step last;
    Dechunk(bad + std::string(20, 'a') + "\r\n0\r\n\r\n", 3, &last);
    CHECK(last == ChunkedDecoder::Step::kError);
  }
  ChunkedDecoder::Step last;
  Dechunk("5\r\nhel", 2, &last);
  CHECK(last == ChunkedDecoder::Step::kNeedMore);
}

std::string Compress(const std::string& text, int window_bits) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST_CASE("http wire: the inflater never produces more than asked") {
  const std::string text(10 << 20, ' ');
  for (const auto& [coding, bits] : {std::pair{ContentCoding::kGzip, 31}, std::pair{ContentCoding::kDeflate, 15}}) {
    const std::string packed = Compress(text, bits);
    Inflater inf(coding);
    std::string out(4096, '\0');
    size_t produced = 0, consumed = 0, total = 0, fed = 0;
    int calls = 0;
    Inflater::Result r = Inflater::Result::kOk;
    while (r == Inflater::Result::kOk && calls < 100000) {
      r = inf.Inflate(std::string_view(packed).substr(fed), out.data(), out.size(), &produced, &consumed);
      REQUIRE(produced <= out.size());
      total += produced;
      fed += consumed;
      ++calls;
    }
    CHECK(r == Inflater::Result::kEnd);
    CHECK(total == text.size());
    CHECK(fed == packed.size());
    CHECK(calls >= static_cast<int>(text.size() / out.size()));
  }
  Inflater corrupt(ContentCoding::kGzip);
  std::string out(64, '\0');
  size_t produced = 0, consumed = 0;
  CHECK(corrupt.Inflate("definitely not gzip", out.data(), out.size(), &produced, &consumed) ==
        Inflater::Result::kError);
}

TEST_CASE("http wire: response heads") {
  const std::string h = ResponseHead(200, "application/json", 17, true, 120, false);
  CHECK(h.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(h.find("Content-Length: 17\r\n") != std::string::npos);
  CHECK(h.find("Keep-Alive: timeout=120\r\n") != std::string::npos);
  CHECK(h.find("Date: ") != std::string::npos);
  CHECK(h.size() >= 4);
  CHECK(h.substr(h.size() - 4) == "\r\n\r\n");
  const std::string closing = ResponseHead(413, "application/json", 0, false, 120, false, "Retry-After: 1\r\n");
  CHECK(closing.find("HTTP/1.1 413 Content Too Large\r\n") == 0);
  CHECK(closing.find("Connection: close\r\n") != std::string::npos);
  CHECK(closing.find("Retry-After: 1\r\n") != std::string::npos);
  CHECK(ResponseHead(200, "text/plain", 0, true, 5, true).find("Connection: keep-alive\r\n") != std::string::npos);
}

}  // namespace
}  // namespace berth::extender::http
