#pragma once

#include <string>
#include <vector>

namespace berth::extender {

/// An aligned plain-text table, what the `?format=text` debug endpoints print.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  /// Columns separated by two spaces, padded to the widest cell; one line per row.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace berth::extender
