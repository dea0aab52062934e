#pragma once

// HTTP/1.1 as berth's server reads and writes it (RFC 9112), with no I/O: the request head, the
// framing of a chunked body, gzip/deflate content decoding in bounded steps, and the response
// head. extender/http_server.cc drives these from its event loop; tests call them directly.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace berth::extender::http {

/// A refusal of the request, with the status to answer and a message for the body.
struct WireError {
  int status = 400;
  std::string message;
};

enum class ContentCoding : uint8_t { kIdentity, kGzip, kDeflate };

/// The request line and the header fields berth acts on.
struct RequestHead {
  std::string method;  ///< as sent (methods are case-sensitive)
  std::string path;    ///< the target up to '?'
  std::string query;   ///< after '?', without it
  int minor_version = 1;  ///< HTTP/1.<minor>
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;  ///< after Connection and the version's default
  bool expect_continue = false;
  ContentCoding coding = ContentCoding::kIdentity;
  size_t head_bytes = 0;  ///< request line and header fields, blank line included
};

/// What ParseRequestHead found in the bytes received so far.
enum class HeadParse : uint8_t {
  kIncomplete,  ///< no blank line yet, and under the size limit
  kComplete,    ///< `head` is filled; the body starts at head->head_bytes
  kError,       ///< `error` says what to answer
};

/// Parses a request head from the start of `in`. Lines end with CRLF (a bare LF is accepted, as
/// RFC 9112 allows); empty lines before the request line are skipped.
///
/// Refusals (the connection is closed after the answer): 400 for a malformed line, field or
/// Content-Length (negative, not a number, several different values), for both Content-Length
/// and Transfer-Encoding, and for an HTTP/1.1 request without Host; 400 for an HTTP version
/// other than 1.0 and 1.1; 414 when the request line alone exceeds `max_bytes`, 431 when the
/// head does; 413 when Content-Length exceeds `max_body`; 501 for a transfer coding other than
/// chunked; 415 for a content coding other than gzip, deflate and identity.
/// \param scan_from where the search for the blank line may start (bytes before it had no
///        blank line), so a head that arrives a byte at a time is not scanned again each time.
HeadParse ParseRequestHead(std::string_view in, size_t max_bytes, uint64_t max_body,
                           RequestHead* head, WireError* error, size_t scan_from = 0);

/// Reads the framing of a chunked body (RFC 9112 section 7.1) incrementally: chunk sizes,
/// extensions (ignored), the data, and the trailer section (ignored). The caller takes the data.
class ChunkedDecoder {
 public:
  enum class Step : uint8_t {
    kNeedMore,  ///< all of `in` was framing; send more bytes
    kData,      ///< `*data` is chunk data at the front of what is left of `in`
    kDone,      ///< the last chunk and the trailer section are read
    kError,     ///< malformed framing (400)
  };
  /// Consumes framing from `in` (\p consumed bytes of it) up to the next chunk data or the end.
  /// On kData, `data` views chunk data that starts at `in.substr(*consumed)`; the caller takes
  /// some or all of it with Took().
  Step Next(std::string_view in, size_t* consumed, std::string_view* data);
  /// `n` bytes of the data Next() returned were taken.
  void Took(size_t n) { left_ -= n; }

 private:
  enum class State : uint8_t { kSize, kExtension, kSizeLf, kData, kDataCr, kDataLf, kTrailer, kDone };
  State state_ = State::kSize;
  uint64_t left_ = 0;     ///< data bytes left in the current chunk
  int size_digits_ = 0;
  size_t line_bytes_ = 0;  ///< bytes of the current size or trailer line (bounded)
  bool trailer_line_empty_ = true;
};

/// Decodes a gzip or deflate (zlib) body with zlib, in steps the caller bounds: it never produces
/// more output than asked, so a small compressed body cannot make berth allocate or spend CPU
/// beyond the body limit.
class Inflater {
 public:
  explicit Inflater(ContentCoding coding);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  enum class Result : uint8_t { kOk, kEnd, kError };
  /// Decodes from `in` into `out`, at most `max_out` bytes (\p produced of them). \param
  /// consumed input bytes used. kEnd once the stream is complete (bytes after it are an error);
  /// kError for a corrupt stream.
  Result Inflate(std::string_view in, char* out, size_t max_out, size_t* produced,
                 size_t* consumed);
  bool ended() const { return ended_; }

 private:
  struct State;
  std::unique_ptr<State> z_;
  bool ended_ = false;
};

/// The reason phrase of a status code ("Not Found").
std::string_view StatusText(int status);

/// A response head: status line, Content-Type and Content-Length, Date, and either
/// `Keep-Alive: timeout=N` or `Connection: close`, then `extra` (complete "Name: value\r\n"
/// lines) and the blank line.
std::string ResponseHead(int status, std::string_view content_type, size_t content_length,
                         bool keep_alive, int keep_alive_seconds, bool http10,
                         std::string_view extra = "");

/// Percent-decodes a query value ("a%2Fb+c" -> "a/b c"); malformed escapes stay as they are.
std::string DecodeQueryValue(std::string_view v);
/// The value of `key` in a query string ("format=text&all=1"), decoded; "" when absent.
std::string QueryParam(std::string_view query, std::string_view key);

}  // namespace berth::extender::http
