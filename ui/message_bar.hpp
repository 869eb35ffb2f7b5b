// MessageBar: a coloured strip above the image for what the user must know now: an error (a bad model file, out
// of device memory, an unwritable gallery), or a standing notice (the random model makes noise; no GPU found).
// Not a dialog: the window stays usable and the message stays readable while the user acts on it.
#pragma once

#include <QFrame>
#include <QLabel>
#include <QPushButton>
#include <QToolButton>
#include <functional>

namespace sdt::ui {

class MessageBar : public QFrame {
  Q_OBJECT
 public:
  enum class Level { Info, Warning, Error };

  explicit MessageBar(QWidget* parent = nullptr);

  // Rich text (links open in the browser). An action adds a button that runs it.
  void show_message(Level level, const QString& text, const QString& action_text = {},
                    std::function<void()> action = {});
  void dismiss();
  void set_closable(bool closable);

  QString text() const { return label_->text(); }
  Level level() const { return level_; }
  bool is_shown() const { return !isHidden(); }

 Q_SIGNALS:
  void dismissed();

 private:
  QLabel* icon_ = nullptr;
  QLabel* label_ = nullptr;
  QPushButton* action_ = nullptr;
  QToolButton* close_ = nullptr;
  std::function<void()> action_fn_;
  Level level_ = Level::Info;
};

}  // namespace sdt::ui
