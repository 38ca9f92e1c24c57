package dist

import (
	"slices"
	"strings"
	"testing"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestEnvTorchrun(t *testing.T) {
	e, err := EnvFrom(envOf(map[string]string{"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
		"MASTER_ADDR": "node07", "MASTER_PORT": "29500"}))
	want := Env{Rank: 5, LocalRank: 1, WorldSize: 8, LocalWorldSize: 4, MasterAddr: "node07", MasterPort: 29500, Source: "torchrun"}
	if err != nil || e != want {
		t.Fatalf("got %+v, %v; want %+v", e, err, want)
	}
	if e.Addr() != "node07:29500" {
		t.Errorf("addr %q", e.Addr())
	}
}

func TestEnvNoneIsOneProcess(t *testing.T) {
	e, err := EnvFrom(envOf(nil))
	if err != nil || e.WorldSize != 1 || e.Rank != 0 || e.Source != "none" {
		t.Fatalf("got %+v, %v", e, err)
	}
}

func TestEnvSlurm(t *testing.T) {
	base := map[string]string{"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS": "6", "SLURM_TASKS_PER_NODE": "2(x3)",
		"SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[07-09],cpu5", "SLURM_JOB_ID": "4812345"}
	e, err := EnvFrom(envOf(base))
	want := Env{Rank: 3, LocalRank: 1, WorldSize: 6, LocalWorldSize: 2, MasterAddr: "gpu07", MasterPort: SlurmPortBase + 2345, Source: "slurm"}
	if err != nil || e != want {
		t.Fatalf("got %+v, %v; want %+v", e, err, want)
	}
	// MASTER_ADDR and MASTER_PORT override the nodelist and the job id;
	// SLURM_NTASKS_PER_NODE is read before SLURM_TASKS_PER_NODE; uneven
	// nodes take this node's count.
	with := func(kv map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range kv {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	e, err = EnvFrom(envOf(with(map[string]string{"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234", "SLURM_NTASKS_PER_NODE": "3"})))
	if err != nil || e.MasterAddr != "10.0.0.1" || e.MasterPort != 1234 || e.LocalWorldSize != 3 {
		t.Errorf("overrides: %+v, %v", e, err)
	}
	e, err = EnvFrom(envOf(with(map[string]string{"SLURM_TASKS_PER_NODE": "4,2(x2)", "SLURM_NODEID": "2", "SLURM_JOB_ID": "7"})))
	if err != nil || e.LocalWorldSize != 2 || e.MasterPort != SlurmPortBase+7 {
		t.Errorf("uneven nodes: %+v, %v", e, err)
	}
	// torchrun's variables win over SLURM's.
	tr := with(map[string]string{"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "5000"})
	if e, err := EnvFrom(envOf(tr)); err != nil || e.Source != "torchrun" || e.WorldSize != 2 || e.MasterPort != 5000 {
		t.Errorf("precedence: %+v, %v", e, err)
	}
	for _, c := range []struct {
		kv   map[string]string
		want string
	}{
		{with(map[string]string{"SLURM_PROCID": "x"}), `SLURM_PROCID="x" is not an integer`},
		{with(map[string]string{"SLURM_PROCID": "6"}), "SLURM_PROCID=6 is not below SLURM_NTASKS=6"},
		{with(map[string]string{"SLURM_LOCALID": "2"}), "SLURM_LOCALID=2 is not below SLURM_TASKS_PER_NODE=2"},
		{with(map[string]string{"SLURM_TASKS_PER_NODE": "2(3)"}), `"2(3)" is not N or N(xR)`},
		{with(map[string]string{"SLURM_TASKS_PER_NODE": "2,4", "SLURM_NODEID": ""}), "differs between nodes and SLURM_NODEID is not set"},
		{with(map[string]string{"SLURM_NODEID": "3"}), "SLURM_NODEID=3 but SLURM_TASKS_PER_NODE=\"2(x3)\" names 3 nodes"},
		{with(map[string]string{"SLURM_JOB_NODELIST": "gpu[07-"}), `SLURM_JOB_NODELIST="gpu[07-"`},
		{with(map[string]string{"SLURM_JOB_NODELIST": ""}), "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set"},
		{with(map[string]string{"SLURM_JOB_ID": ""}), "neither MASTER_PORT nor SLURM_JOB_ID is set"},
		{with(map[string]string{"SLURM_JOB_ID": "12_3"}), `SLURM_JOB_ID="12_3" is not a job number`},
		{with(map[string]string{"MASTER_PORT": "70000"}), "MASTER_PORT=70000 is not a TCP port"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "MASTER_PORT is not set"},
		{map[string]string{"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK=2 is not below WORLD_SIZE=2"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "LOCAL_RANK is not set"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "LOCAL_WORLD_SIZE=4 is above WORLD_SIZE=2"},
		{map[string]string{"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1 is below 0"},
	} {
		_, err := EnvFrom(envOf(c.kv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.kv, err, c.want)
		}
	}
}

func TestExpandHostlist(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"node1", []string{"node1"}},
		{"a,b", []string{"a", "b"}},
		{"gpu[01-03,07],cpu5", []string{"gpu01", "gpu02", "gpu03", "gpu07", "cpu5"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[08-10]", []string{"n08", "n09", "n10"}},
		{"n[098-101]", []string{"n098", "n099", "n100", "n101"}},
		{"n[3]", []string{"n3"}},
		{"n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		{"rack[1-2]-n[01-02]", []string{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}},
		{"x[1,3],y[2-3]z", []string{"x1", "x3", "y2z", "y3z"}},
		{"[1-2]", []string{"1", "2"}},
		{"node-a.cluster.org", []string{"node-a.cluster.org"}},
	} {
		got, err := ExpandHostlist(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "empty host name"},
		{"a,,b", "empty host name"},
		{"gpu[01-03", "a [ without its ]"},
		{"gpu01]", "a ] without its ["},
		{"gpu[1[2]]", "a bracket inside a bracket"},
		{"gpu[]", "empty brackets"},
		{"gpu[3-1]", `the range "3-1" runs backwards`},
		{"gpu[a-3]", `"a-3" is not a number`},
		{"gpu[1-]", `"1-" is not a number`},
		{"gpu[0-4000000000]", "more than"},
		{"a[0-1023]b[0-1023]c[0-1]", "more than"},
	} {
		_, err := ExpandHostlist(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ExpandHostlist(%q): error %v, want one saying %q", c.in, err, c.want)
		}
	}
}
