#include "extender/http_wire.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "core/strings.h"

namespace berth::extender::http {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 token characters (field names, methods, codings).
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

/// Calls `fn(element)` for each comma-separated element of a field value, trimmed, skipping
/// empty ones; stops when fn returns false.
template <class Fn>
void ForEachElement(std::string_view value, Fn&& fn) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view e = Trim(value.substr(0, comma));
    if (!e.empty() && !fn(e)) return;
    if (comma == std::string_view::npos) return;
    value.remove_prefix(comma + 1);
  }
}

HeadParse Refuse(WireError* error, int status, std::string message) {
  error->status = status;
  error->message = std::move(message);
  return HeadParse::kError;
}

// Where the line that starts at `from` ends (the index of its '\n'), or npos.
size_t LineEnd(std::string_view in, size_t from) { return in.find('\n', from); }

// The line [from, lf) without its CR.
std::string_view Line(std::string_view in, size_t from, size_t lf) {
  std::string_view line = in.substr(from, lf - from);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

HeadParse ParseRequestHead(std::string_view in, size_t max_bytes, uint64_t max_body,
                           RequestHead* head, WireError* error, size_t scan_from) {
  // Empty lines before the request line are skipped (RFC 9112 section 2.2).
  size_t start = 0;
  while (start < in.size() && (in[start] == '\r' || in[start] == '\n')) ++start;
  if (start > 64) return Refuse(error, 400, "too many empty lines before the request line");
  // Find the blank line that ends the head.
  size_t end = std::string_view::npos;  // index just past the blank line
  for (size_t lf = LineEnd(in, std::max(scan_from, start)); lf != std::string_view::npos;
       lf = LineEnd(in, lf + 1)) {
    if (lf + 1 < in.size() && in[lf + 1] == '\n') {
      end = lf + 2;
      break;
    }
    if (lf + 2 < in.size() && in[lf + 1] == '\r' && in[lf + 2] == '\n') {
      end = lf + 3;
      break;
    }
    if (lf + 1 >= in.size() || (lf + 2 >= in.size() && in[lf + 1] == '\r')) break;
  }
  if (end == std::string_view::npos) {
    const size_t first_lf = LineEnd(in, start);
    if (first_lf == std::string_view::npos && in.size() - start > max_bytes) {
      return Refuse(error, 414, StrCat("request line longer than ", max_bytes, " bytes"));
    }
    if (in.size() - start > max_bytes) {
      return Refuse(error, 431, StrCat("request header fields exceed ", max_bytes, " bytes"));
    }
    return HeadParse::kIncomplete;
  }
  if (end - start > max_bytes) {
    return Refuse(error, 431, StrCat("request header fields exceed ", max_bytes, " bytes"));
  }

  *head = RequestHead{};
  head->head_bytes = end;
  // Request line: method SP request-target SP HTTP-version.
  size_t lf = LineEnd(in, start);
  const std::string_view request_line = Line(in, start, lf);
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Refuse(error, 400, StrCat("malformed request line \"", request_line.substr(0, 60),
                                     "\" (expected METHOD /path HTTP/1.1)"));
  }
  const std::string_view method = request_line.substr(0, sp1);
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!IsToken(method)) {
    return Refuse(error, 400, StrCat("malformed request method \"", method.substr(0, 40), "\""));
  }
  if (target.empty() || target.front() != '/') {
    return Refuse(error, 400, "the request target must be a path starting with /");
  }
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Refuse(error, 400, "control character in the request target");
    }
  }
  if (version == "HTTP/1.1") {
    head->minor_version = 1;
  } else if (version == "HTTP/1.0") {
    head->minor_version = 0;
    head->keep_alive = false;
  } else {
    return Refuse(error, 400, StrCat("unsupported HTTP version \"", version.substr(0, 20),
                                     "\" (this server speaks HTTP/1.0 and HTTP/1.1)"));
  }
  head->method = std::string(method);
  const size_t q = target.find('?');
  head->path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) head->query = std::string(target.substr(q + 1));

  bool has_host = false;
  bool has_transfer_encoding = false;
  std::optional<std::string_view> connection;
  for (size_t from = lf + 1;; from = lf + 1) {
    lf = LineEnd(in, from);
    const std::string_view line = Line(in, from, lf);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return Refuse(error, 400, "obsolete line folding in a header field");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return Refuse(error, 400, StrCat("header field without a colon: \"", line.substr(0, 60), "\""));
    }
    const std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) {
      // Includes whitespace between the name and the colon (RFC 9112 section 5.1).
      return Refuse(error, 400, StrCat("malformed header field name \"", name.substr(0, 60), "\""));
    }
    const std::string_view value = Trim(line.substr(colon + 1));
    for (char c : value) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
        return Refuse(error, 400, StrCat("control character in the value of header field ",
                                         name.substr(0, 60)));
      }
    }
    if (EqualsNoCase(name, "host")) {
      if (has_host) return Refuse(error, 400, "more than one Host header field");
      has_host = true;
    } else if (EqualsNoCase(name, "content-length")) {
      uint64_t n = 0;
      bool any = false, big = false;
      for (std::string_view v = value;;) {  // "5, 5" is one length sent twice
        const size_t comma = v.find(',');
        const std::string_view digits = Trim(v.substr(0, comma));
        if (digits.empty()) return Refuse(error, 400, "malformed Content-Length");
        uint64_t this_n = 0;
        bool this_big = false;
        for (char c : digits) {
          if (c < '0' || c > '9') {
            return Refuse(error, 400,
                          StrCat("malformed Content-Length \"", value.substr(0, 40), "\""));
          }
          if (this_n > (UINT64_MAX - 9) / 10) {
            this_big = true;
          } else {
            this_n = this_n * 10 + static_cast<uint64_t>(c - '0');
          }
        }
        if (any && (this_n != n || this_big != big)) {
          return Refuse(error, 400, "conflicting Content-Length values");
        }
        n = this_n;
        big = this_big;
        any = true;
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
      if (head->content_length && (*head->content_length != n || big)) {
        return Refuse(error, 400, "conflicting Content-Length values");
      }
      if (big || n > max_body) {
        return Refuse(error, 413, StrCat("request body exceeds the limit of ", max_body, " bytes"));
      }
      head->content_length = n;
    } else if (EqualsNoCase(name, "transfer-encoding")) {
      bool ok = true;
      int codings = 0;
      ForEachElement(value, [&](std::string_view coding) {
        ++codings;
        if (!EqualsNoCase(coding, "chunked") || has_transfer_encoding || codings > 1) ok = false;
        return ok;
      });
      if (!ok || codings == 0) {
        return Refuse(error, 501, "unsupported Transfer-Encoding (only chunked is accepted)");
      }
      has_transfer_encoding = true;
      head->chunked = true;
    } else if (EqualsNoCase(name, "connection")) {
      connection = value;
    } else if (EqualsNoCase(name, "expect")) {
      if (!EqualsNoCase(value, "100-continue")) {
        error->status = 417;
        error->message = StrCat("unsupported expectation \"", value.substr(0, 40), "\"");
        return HeadParse::kError;
      }
      head->expect_continue = head->minor_version >= 1;
    } else if (EqualsNoCase(name, "content-encoding")) {
      int codings = 0;
      bool ok = true;
      ForEachElement(value, [&](std::string_view coding) {
        if (EqualsNoCase(coding, "identity")) return true;
        if (++codings > 1) {
          ok = false;
        } else if (EqualsNoCase(coding, "gzip") || EqualsNoCase(coding, "x-gzip")) {
          head->coding = ContentCoding::kGzip;
        } else if (EqualsNoCase(coding, "deflate")) {
          head->coding = ContentCoding::kDeflate;
        } else {
          ok = false;
        }
        return ok;
      });
      if (!ok) {
        return Refuse(error, 415,
                      "unsupported Content-Encoding (one of gzip or deflate is accepted)");
      }
    }
  }
  if (head->chunked && head->content_length) {
    // A request smuggling vector: which framing an intermediary used is unknowable.
    return Refuse(error, 400, "both Content-Length and Transfer-Encoding");
  }
  if (head->chunked && head->minor_version == 0) {
    return Refuse(error, 400, "Transfer-Encoding in an HTTP/1.0 request");
  }
  if (head->minor_version == 1 && !has_host) {
    return Refuse(error, 400, "HTTP/1.1 request without a Host header field");
  }
  if (connection) {
    ForEachElement(*connection, [&](std::string_view option) {
      if (EqualsNoCase(option, "close")) head->keep_alive = false;
      if (EqualsNoCase(option, "keep-alive") && head->minor_version == 0) head->keep_alive = true;
      return true;
    });
  }
  return HeadParse::kComplete;
}

// ---- chunked framing ----------------------------------------------------------------------------

ChunkedDecoder::Step ChunkedDecoder::Next(std::string_view in, size_t* consumed,
                                          std::string_view* data) {
  // A size line, an extension or a trailer line longer than this is refused.
  constexpr size_t kMaxLine = 4096;
  size_t i = 0;
  auto done = [&](Step s) {
    *consumed = i;
    return s;
  };
  while (i < in.size()) {
    const char c = in[i];
    switch (state_) {
      case State::kSize:
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
          if (++size_digits_ > 15) return done(Step::kError);  // 2^60 bytes: never a real size
          const uint64_t digit = c <= '9' ? static_cast<uint64_t>(c - '0')
                                          : static_cast<uint64_t>(Lower(c) - 'a' + 10);
          left_ = left_ * 16 + digit;
          ++i;
        } else if (size_digits_ == 0) {
          return done(Step::kError);
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kExtension;
          line_bytes_ = 0;
          ++i;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
          ++i;
        } else if (c == '\n') {
          ++i;
          state_ = left_ == 0 ? State::kTrailer : State::kData;
          trailer_line_empty_ = true;
          line_bytes_ = 0;
        } else {
          return done(Step::kError);
        }
        break;
      case State::kExtension:
        if (++line_bytes_ > kMaxLine) return done(Step::kError);
        ++i;
        if (c == '\n') {
          state_ = left_ == 0 ? State::kTrailer : State::kData;
          trailer_line_empty_ = true;
          line_bytes_ = 0;
        }
        break;
      case State::kSizeLf:
        if (c != '\n') return done(Step::kError);
        ++i;
        state_ = left_ == 0 ? State::kTrailer : State::kData;
        trailer_line_empty_ = true;
        line_bytes_ = 0;
        break;
      case State::kData:
        if (left_ == 0) {
          state_ = State::kDataCr;
          break;
        }
        *data = in.substr(i, static_cast<size_t>(std::min<uint64_t>(left_, in.size() - i)));
        return done(Step::kData);
      case State::kDataCr:
        ++i;
        if (c == '\n') {
          state_ = State::kSize;
          size_digits_ = 0;
        } else if (c == '\r') {
          state_ = State::kDataLf;
        } else {
          return done(Step::kError);
        }
        break;
      case State::kDataLf:
        if (c != '\n') return done(Step::kError);
        ++i;
        state_ = State::kSize;
        size_digits_ = 0;
        break;
      case State::kTrailer:
        ++i;
        if (c == '\n') {
          if (trailer_line_empty_) {
            state_ = State::kDone;
            return done(Step::kDone);
          }
          trailer_line_empty_ = true;
          line_bytes_ = 0;
        } else if (c != '\r') {
          trailer_line_empty_ = false;
          if (++line_bytes_ > kMaxLine) return done(Step::kError);
        }
        break;
      case State::kDone:
        return done(Step::kDone);
    }
  }
  if (state_ == State::kData && left_ == 0) state_ = State::kDataCr;
  return done(state_ == State::kDone ? Step::kDone : Step::kNeedMore);
}

// ---- content decoding ---------------------------------------------------------------------------

struct Inflater::State {
  z_stream z{};
  bool ok = false;
};

Inflater::Inflater(ContentCoding coding) : z_(std::make_unique<State>()) {
  // 16 + 15: gzip wrapper; 15: zlib wrapper ("deflate" as HTTP names it). Raw deflate, which some
  // old clients send as "deflate", is not accepted.
  const int window_bits = coding == ContentCoding::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
  z_->ok = inflateInit2(&z_->z, window_bits) == Z_OK;
}

Inflater::~Inflater() {
  if (z_->ok) inflateEnd(&z_->z);
}

Inflater::Result Inflater::Inflate(std::string_view in, char* out, size_t max_out,
                                   size_t* produced, size_t* consumed) {
  *consumed = 0;
  *produced = 0;
  if (!z_->ok) return Result::kError;
  if (ended_) return in.empty() ? Result::kEnd : Result::kError;
  z_stream& z = z_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(std::min<size_t>(max_out, UINT32_MAX));
  const int rc = inflate(&z, Z_NO_FLUSH);
  *consumed = static_cast<size_t>(reinterpret_cast<const char*>(z.next_in) - in.data());
  *produced = static_cast<size_t>(reinterpret_cast<char*>(z.next_out) - out);
  if (rc == Z_STREAM_END) {
    ended_ = true;
    return *consumed == in.size() ? Result::kEnd : Result::kError;
  }
  if (rc == Z_OK || rc == Z_BUF_ERROR) return Result::kOk;  // Z_BUF_ERROR: no progress possible now
  return Result::kError;
}

// ---- responses ----------------------------------------------------------------------------------

std::string_view StatusText(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

namespace {

// "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n", formatted once a second per thread.
std::string_view DateLine() {
  thread_local time_t cached_at = 0;
  thread_local char line[64];
  thread_local size_t len = 0;
  const time_t now = ::time(nullptr);
  if (now != cached_at) {
    cached_at = now;
    tm t{};
    ::gmtime_r(&now, &t);
    len = std::strftime(line, sizeof(line), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &t);
  }
  return std::string_view(line, len);
}

}  // namespace

std::string ResponseHead(int status, std::string_view content_type, size_t content_length,
                         bool keep_alive, int keep_alive_seconds, bool http10,
                         std::string_view extra) {
  std::string h;
  h.reserve(200 + extra.size());
  StrAppend(&h, "HTTP/1.1 ", status, " ", StatusText(status), "\r\n");
  h += DateLine();
  if (!content_type.empty()) StrAppend(&h, "Content-Type: ", content_type, "\r\n");
  StrAppend(&h, "Content-Length: ", content_length, "\r\n");
  if (keep_alive) {
    if (http10) h += "Connection: keep-alive\r\n";
    StrAppend(&h, "Keep-Alive: timeout=", keep_alive_seconds, "\r\n");
  } else {
    h += "Connection: close\r\n";
  }
  h += extra;
  h += "\r\n";
  return h;
}

std::string DecodeQueryValue(std::string_view v) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = Lower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '+') {
      out += ' ';
    } else if (v[i] == '%' && i + 2 < v.size() && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
      out += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

std::string QueryParam(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key) {
      return eq == std::string_view::npos ? "" : DecodeQueryValue(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

}  // namespace berth::extender::http
