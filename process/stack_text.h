// What the stack tools print, made into the one layout the hang report
// reads (gdb's: "Thread N (...)" headers, "#k" frames, main thread first),
// and the kernel's view of a process's threads, which costs no tool.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "process.h"  // StateWords

namespace ltd {

// gdb's `thread apply all bt`: the frames and thread headers without its
// chatter, "Thread 1" (the main thread, printed last) first.
std::string GdbFrames(std::string_view out);

// `eu-stack -p PID`: its "TID N:" sections as "Thread N (LWP N):", the
// main thread (TID == pid) first.
std::string EuStackFrames(std::string_view out, pid_t pid);

// Every thread's wchan (and its kernel stack where the kernel shows it,
// which takes root) from /proc/PID/task, as lines that start "kernel:":
// what a thread blocked in a syscall waits for, even when no tool could
// read its user-space frames. "" when the process is gone.
std::string KernelView(pid_t pid, std::string_view proc_root = "/proc");
// The same from `pid_dir`, the process's /proc directory (ProcDir::path()).
std::string KernelViewOf(const std::string& pid_dir, pid_t pid);

// The text of /proc/PID/task/TID/stack ("[<0>] symbol+0xOFF/0xLEN" a
// line) as "kernel:   symbol+0xOFF/0xLEN" lines, at most 16.
std::string KernelFrames(std::string_view stack);

// The state letter of /proc/PID/stat (or task/TID/stat) text; 0 if none.
char ThreadState(std::string_view stat);

}  // namespace ltd
