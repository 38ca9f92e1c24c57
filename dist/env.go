// Package dist runs one training on several processes: where a process
// stands in the job (env.go, from torchrun's or SLURM's variables), the
// key-value store the processes meet through (store.go), and the
// communicator the trainer sums gradients with (comm.go; tcpcomm.go is
// the CPU one, a ring over TCP). docs/DISTRIBUTED.md says how to launch a
// job.
package dist

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Env is the process's place in the job.
type Env struct {
	// Rank is the process's index in the job, 0 ≤ Rank < WorldSize.
	Rank int
	// LocalRank is its index on its node: the GPU it uses.
	LocalRank int
	// WorldSize is the number of processes in the job.
	WorldSize int
	// LocalWorldSize is the number of processes on its node.
	LocalWorldSize int
	// MasterAddr and MasterPort are where rank 0 serves the store ("" and
	// 0 for a job of one process).
	MasterAddr string
	MasterPort int
	// Source names where the values came from: "torchrun", "slurm" or
	// "none" (a job of one process).
	Source string
}

// Addr is the store's address, host:port.
func (e Env) Addr() string { return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort)) }

// FromEnviron reads the process's environment; see EnvFrom.
func FromEnviron() (Env, error) { return EnvFrom(os.Getenv) }

// SlurmPortBase plus the last four digits of SLURM_JOB_ID is the store's
// port under SLURM when MASTER_PORT is not set, as PyTorch Lightning
// derives it: every task of a job computes the same port without talking,
// and two jobs sharing a node differ unless their ids agree in the last
// four digits.
const SlurmPortBase = 15000

// EnvFrom reads the process's place in the job through getenv:
//
//   - torchrun's variables (what `train launch` sets) when RANK or
//     WORLD_SIZE is set: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
//     MASTER_ADDR, MASTER_PORT, all required;
//   - else SLURM's, when SLURM_PROCID is set (a task started by srun):
//     SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, the tasks on this node
//     from SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE ("2(x3),1" and
//     SLURM_NODEID), MASTER_ADDR or else the first host of
//     SLURM_JOB_NODELIST (SLURM_NODELIST), MASTER_PORT or else
//     SlurmPortBase + the last four digits of SLURM_JOB_ID;
//   - else a job of one process.
//
// torchrun's variables win when both are set: torchrun (or `train
// launch`) started under srun has set them for its own children. A
// missing or malformed variable is an error naming it and its value.
func EnvFrom(getenv func(string) string) (Env, error) {
	if getenv("RANK") != "" || getenv("WORLD_SIZE") != "" {
		return torchrunEnv(getenv)
	}
	if getenv("SLURM_PROCID") != "" {
		return slurmEnv(getenv)
	}
	return Env{WorldSize: 1, LocalWorldSize: 1, Source: "none"}, nil
}

// envInt reads the integer variable name, at least min.
func envInt(getenv func(string) string, name string, min int) (int, error) {
	s := getenv(name)
	if s == "" {
		return 0, fmt.Errorf("%s is not set", name)
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not an integer", name, s)
	}
	if v < min {
		return 0, fmt.Errorf("%s=%d is below %d", name, v, min)
	}
	return v, nil
}

// envPort reads a TCP port from name.
func envPort(getenv func(string) string, name string) (int, error) {
	p, err := envInt(getenv, name, 1)
	if err == nil && p > 65535 {
		err = fmt.Errorf("%s=%d is not a TCP port (1 to 65535)", name, p)
	}
	return p, err
}

func torchrunEnv(getenv func(string) string) (Env, error) {
	e := Env{Source: "torchrun"}
	var err error
	for _, v := range []struct {
		name string
		dst  *int
		min  int
	}{{"WORLD_SIZE", &e.WorldSize, 1}, {"RANK", &e.Rank, 0}, {"LOCAL_WORLD_SIZE", &e.LocalWorldSize, 1}, {"LOCAL_RANK", &e.LocalRank, 0}} {
		if *v.dst, err = envInt(getenv, v.name, v.min); err != nil {
			return Env{}, fmt.Errorf("torchrun's variables: %w", err)
		}
	}
	if err := e.check("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"); err != nil {
		return Env{}, fmt.Errorf("torchrun's variables: %w", err)
	}
	if e.MasterAddr = strings.TrimSpace(getenv("MASTER_ADDR")); e.MasterAddr == "" {
		return Env{}, fmt.Errorf("torchrun's variables: MASTER_ADDR is not set")
	}
	if e.MasterPort, err = envPort(getenv, "MASTER_PORT"); err != nil {
		return Env{}, fmt.Errorf("torchrun's variables: %w", err)
	}
	return e, nil
}

// check holds the ranks below their sizes, naming the variables.
func (e Env) check(rank, world, local, localWorld string) error {
	if e.Rank >= e.WorldSize {
		return fmt.Errorf("%s=%d is not below %s=%d", rank, e.Rank, world, e.WorldSize)
	}
	if e.LocalRank >= e.LocalWorldSize {
		return fmt.Errorf("%s=%d is not below %s=%d", local, e.LocalRank, localWorld, e.LocalWorldSize)
	}
	if e.LocalWorldSize > e.WorldSize {
		return fmt.Errorf("%s=%d is above %s=%d", localWorld, e.LocalWorldSize, world, e.WorldSize)
	}
	return nil
}

func slurmEnv(getenv func(string) string) (Env, error) {
	e := Env{Source: "slurm"}
	var err error
	wrap := func(err error) (Env, error) { return Env{}, fmt.Errorf("SLURM's variables: %w", err) }
	if e.Rank, err = envInt(getenv, "SLURM_PROCID", 0); err != nil {
		return wrap(err)
	}
	if e.WorldSize, err = envInt(getenv, "SLURM_NTASKS", 1); err != nil {
		return wrap(err)
	}
	if e.LocalRank, err = envInt(getenv, "SLURM_LOCALID", 0); err != nil {
		return wrap(err)
	}
	localName := "SLURM_NTASKS_PER_NODE"
	if getenv(localName) != "" {
		if e.LocalWorldSize, err = envInt(getenv, localName, 1); err != nil {
			return wrap(err)
		}
	} else {
		localName = "SLURM_TASKS_PER_NODE"
		if e.LocalWorldSize, err = tasksOnThisNode(getenv); err != nil {
			return wrap(err)
		}
	}
	if err := e.check("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", localName); err != nil {
		return wrap(err)
	}
	if e.MasterAddr = strings.TrimSpace(getenv("MASTER_ADDR")); e.MasterAddr == "" {
		name := "SLURM_JOB_NODELIST"
		list := getenv(name)
		if list == "" {
			name = "SLURM_NODELIST"
			list = getenv(name)
		}
		if list == "" {
			return wrap(fmt.Errorf("neither MASTER_ADDR nor SLURM_JOB_NODELIST is set"))
		}
		hosts, err := ExpandHostlist(list)
		if err != nil {
			return wrap(fmt.Errorf("%s=%q: %w", name, list, err))
		}
		e.MasterAddr = hosts[0]
	}
	if getenv("MASTER_PORT") != "" {
		if e.MasterPort, err = envPort(getenv, "MASTER_PORT"); err != nil {
			return wrap(err)
		}
		return e, nil
	}
	id := strings.TrimSpace(getenv("SLURM_JOB_ID"))
	if id == "" {
		return wrap(fmt.Errorf("neither MASTER_PORT nor SLURM_JOB_ID is set"))
	}
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return wrap(fmt.Errorf("SLURM_JOB_ID=%q is not a job number", id))
	}
	if len(id) > 4 {
		id = id[len(id)-4:]
	}
	n, _ := strconv.Atoi(id)
	e.MasterPort = SlurmPortBase + n
	return e, nil
}

// tasksOnThisNode reads SLURM_TASKS_PER_NODE ("2(x3),1": two tasks on
// each of the first three nodes, one on the fourth) at SLURM_NODEID (not
// needed when every node runs the same number).
func tasksOnThisNode(getenv func(string) string) (int, error) {
	s := getenv("SLURM_TASKS_PER_NODE")
	if s == "" {
		return 0, fmt.Errorf("neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set")
	}
	var counts []int
	for _, part := range strings.Split(s, ",") {
		n, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return 0, fmt.Errorf("SLURM_TASKS_PER_NODE=%q: %q is not N or N(xR)", s, part)
			}
			n, rep = part[:i], part[i+2:len(part)-1]
		}
		v, err1 := strconv.Atoi(n)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || v < 1 || r < 1 {
			return 0, fmt.Errorf("SLURM_TASKS_PER_NODE=%q: %q is not N or N(xR)", s, part)
		}
		for range r {
			counts = append(counts, v)
		}
	}
	same := true
	for _, c := range counts {
		same = same && c == counts[0]
	}
	if getenv("SLURM_NODEID") == "" {
		if !same {
			return 0, fmt.Errorf("SLURM_TASKS_PER_NODE=%q differs between nodes and SLURM_NODEID is not set", s)
		}
		return counts[0], nil
	}
	node, err := envInt(getenv, "SLURM_NODEID", 0)
	if err != nil {
		return 0, err
	}
	if node >= len(counts) {
		return 0, fmt.Errorf("SLURM_NODEID=%d but SLURM_TASKS_PER_NODE=%q names %d nodes", node, s, len(counts))
	}
	return counts[node], nil
}
