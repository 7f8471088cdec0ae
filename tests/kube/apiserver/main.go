// Command kube-apiserver-etcd is a test peer: one process that runs an embedded etcd on a loopback
// port and then the real kube-apiserver against it. Tests start it; nothing in the product uses it.
//
// Usage: kube-apiserver-etcd --etcd-dir DIR --etcd-client-port N --etcd-peer-port M -- <kube-apiserver flags>
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	dieWithParent()
	fs := flag.NewFlagSet("etcd", flag.ExitOnError)
	dir := fs.String("etcd-dir", "", "etcd data directory")
	clientPort := fs.Int("etcd-client-port", 0, "etcd client port on 127.0.0.1")
	peerPort := fs.Int("etcd-peer-port", 0, "etcd peer port on 127.0.0.1")
	args := os.Args[1:]
	split := len(args)
	for i, a := range args {
		if a == "--" {
			split = i
			break
		}
	}
	if err := fs.Parse(args[:split]); err != nil {
		os.Exit(2)
	}
	rest := []string{}
	if split < len(args) {
		rest = args[split+1:]
	}
	if *dir == "" || *clientPort == 0 || *peerPort == 0 {
		fmt.Fprintln(os.Stderr, "--etcd-dir, --etcd-client-port and --etcd-peer-port are required")
		os.Exit(2)
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *clientPort))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *peerPort))
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, pu.String())
	// Tests throw the data away; skip fsync so a suite is not bound by the disk.
	cfg.UnsafeNoFsync = true
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded etcd:", err)
		os.Exit(1)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "embedded etcd did not become ready in 60s")
		os.Exit(1)
	}

	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(append([]string{fmt.Sprintf("--etcd-servers=%s", cu.String())}, rest...))
	code := cli.Run(cmd)
	etcd.Close()
	os.Exit(code)
}

// dieWithParent asks the kernel to SIGKILL this process when the test runner that started it dies, even by
// SIGKILL, so a crashed suite never leaves an apiserver and its etcd behind. SANDBOX_TEST_PARENT_PID closes the race
// where the parent died before the request was made.
func dieWithParent() {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_PDEATHSIG):", errno)
	}
	if want, err := strconv.Atoi(os.Getenv("SANDBOX_TEST_PARENT_PID")); err == nil && os.Getppid() != want {
		fmt.Fprintln(os.Stderr, "parent process is gone; exiting")
		os.Exit(1)
	}
}
