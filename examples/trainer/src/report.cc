#include "report.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "ringlet/error.h"

namespace trainer {

Progress::Progress(int64_t total, bool terminal)
    : total_(total), terminal_(terminal), start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t done, const std::string& status) {
  if (!terminal_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - lastDraw_ < std::chrono::milliseconds(100)) return;
  lastDraw_ = now;
  constexpr int kWidth = 30;
  int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
  double secs = std::chrono::duration<double>(now - start_).count();
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %lld/%lld %.0fs %s\033[K", bar.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_), secs, status.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::line(const std::string& text) {
  if (terminal_ && drawn_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stdout, "%s\n", text.c_str());
  std::fflush(stdout);
  drawn_ = false;
}

void Progress::finish() {
  if (terminal_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

CsvLog::CsvLog(const std::string& path, bool append) {
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (file_ == nullptr) {
    throw ringlet::IoError(fmt::format("cannot open CSV {}: {}", path, std::strerror(errno)));
  }
  if (!append || !exists) {
    std::fprintf(file_, "step,lr,loss,accuracy,eval_loss,eval_accuracy\n");
  }
}

CsvLog::~CsvLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void CsvLog::row(int64_t step, double lr, double loss, double accuracy, double evalLoss,
                 double evalAccuracy) {
  auto opt = [](double v) { return std::isnan(v) ? std::string() : fmt::format("{:.6g}", v); };
  std::fprintf(file_, "%s\n",
               fmt::format("{},{:.6g},{:.6g},{:.4f},{},{}", step, lr, loss, accuracy, opt(evalLoss),
                           opt(evalAccuracy))
                   .c_str());
  std::fflush(file_);
}

namespace {
bool onPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}
}  // namespace

bool plotLossCurve(const std::string& csvPath, const std::string& pngPath, const std::string& title,
                   std::string* why) {
  if (!onPath("gnuplot")) {
    *why = "gnuplot is not installed (apt-get install gnuplot-nox)";
    return false;
  }
  std::FILE* pipe = ::popen("gnuplot 2>&1", "w");
  if (pipe == nullptr) {
    *why = fmt::format("cannot start gnuplot: {}", std::strerror(errno));
    return false;
  }
  std::string script = fmt::format(
      "set terminal pngcairo size 900,540\n"
      "set output '{}'\n"
      "set datafile separator ','\n"
      "set title '{}'\n"
      "set xlabel 'step'\nset ylabel 'loss'\nset grid\nset key top right\n"
      "plot '{}' using 1:3 every ::1 with lines lw 1 title 'train loss', "
      "'' using 1:5 every ::1 with linespoints pt 7 lw 2 title 'eval loss'\n",
      pngPath, title, csvPath);
  std::fputs(script.c_str(), pipe);
  int status = ::pclose(pipe);
  if (status != 0) {
    *why = fmt::format("gnuplot exited with status {}", WEXITSTATUS(status));
    return false;
  }
  return true;
}

}  // namespace trainer
