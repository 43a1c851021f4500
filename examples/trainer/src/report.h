#pragma once
// Reporting for ringlet-train: a progress bar on a terminal (plain lines otherwise), a CSV of
// the loss curve and a PNG plot of it drawn by gnuplot when gnuplot is installed.

#include <chrono>
#include <cstdio>
#include <string>

namespace trainer {

class Progress {
 public:
  Progress(int64_t total, bool terminal);
  // Redraws the bar (terminal only) with a short status after it.
  void update(int64_t done, const std::string& status);
  // Prints a line, keeping the bar intact below it.
  void line(const std::string& text);
  void finish();

 private:
  int64_t total_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

class CsvLog {
 public:
  // Appends when resuming so one file holds the whole curve. Throws IoError if unwritable.
  CsvLog(const std::string& path, bool append);
  ~CsvLog();
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;
  void row(int64_t step, double lr, double loss, double accuracy, double evalLoss,
           double evalAccuracy);

 private:
  std::FILE* file_ = nullptr;
};

// Draws the train (and eval) loss from csvPath into pngPath. Returns false with *why filled
// when gnuplot is missing or fails; never throws.
bool plotLossCurve(const std::string& csvPath, const std::string& pngPath, const std::string& title,
                   std::string* why);

}  // namespace trainer
