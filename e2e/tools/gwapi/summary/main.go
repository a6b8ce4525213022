// Command conformance-summary reads what a run of the upstream Gateway API conformance suite
// (conformance.test, built by ../build.sh from the same release) left behind, its verbose
// test log and its report, and prints per conformance profile how many tests passed, failed,
// were skipped and were not supported, core and extended apart. It exits 1 when a test that
// ran failed, or when the suite failed before it ran any test (its Setup).
//
// The counts come from the test log, not the report: in v1.6.1 the suite writes the report
// before its Parallel tests have run, so those count as passed whatever their outcome
// (kubernetes-sigs/gateway-api#5142, fixed after v1.6.1 by #5143). Where the report's numbers
// differ from the log's, both are printed.
//
//	conformance-summary -log conformance.log -report report.yaml \
//	    -profiles GATEWAY-HTTP,GATEWAY-TLS -skip-tests UDPRoute
//	conformance-summary -list     # every Gateway test: features, provisional, parallel, profiles
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

var profiles = map[string]suite.ConformanceProfile{
	"GATEWAY-HTTP": suite.GatewayHTTPConformanceProfile,
	"GATEWAY-TLS":  suite.GatewayTLSConformanceProfile,
	"GATEWAY-GRPC": suite.GatewayGRPCConformanceProfile,
	"GATEWAY-TCP":  suite.GatewayTCPConformanceProfile,
	"GATEWAY-UDP":  suite.GatewayUDPConformanceProfile,
}

// level is "core" or "extended" when every feature of the test is in the profile (the suite's
// getConformanceProfilesForTest and isTestExtended), "" when the test is not in it.
func level(p suite.ConformanceProfile, t suite.ConformanceTest) string {
	core := true
	for _, f := range t.Features {
		if !p.CoreFeatures.Has(f) && !p.ExtendedFeatures.Has(f) {
			return ""
		}
		if !p.CoreFeatures.Has(f) {
			core = false
		}
	}
	if core {
		return "core"
	}
	return "extended"
}

func profileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func gatewayTests() []suite.ConformanceTest {
	var out []suite.ConformanceTest
	for _, t := range tests.ConformanceTests {
		if !sliceHas(t.Features, features.SupportMesh) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ShortName < out[j].ShortName })
	return out
}

func sliceHas(fs []features.FeatureName, f features.FeatureName) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

func list() {
	fmt.Println("test\tfeatures\tprovisional\tparallel\tprofiles")
	for _, t := range gatewayTests() {
		var fs, in []string
		for _, f := range t.Features {
			fs = append(fs, string(f))
		}
		for _, n := range profileNames() {
			if l := level(profiles[n], t); l != "" {
				in = append(in, n+":"+l)
			}
		}
		fmt.Printf("%s\t%s\t%t\t%t\t%s\n", t.ShortName, strings.Join(fs, ","), t.Provisional, t.Parallel, strings.Join(in, " "))
	}
}

var (
	resultRE    = regexp.MustCompile(`^ {4}--- (PASS|FAIL|SKIP): TestConformance/(\S+) \(`)
	topRE       = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): TestConformance \(`)
	supportedRE = regexp.MustCompile(`Supported features for GatewayClass \S+: \[([^\]]*)\]`)
)

type counts struct{ passed, failed, skipped, notSupported, missing int }

func main() {
	logPath := flag.String("log", "", "the suite's output (-test.v)")
	reportPath := flag.String("report", "", "the suite's report (--report-output); optional")
	profileList := flag.String("profiles", "", "the profiles the suite ran (--conformance-profiles)")
	skipList := flag.String("skip-tests", "", "the tests the suite skipped (--skip-tests)")
	doList := flag.Bool("list", false, "list the Gateway tests of this release and exit")
	flag.Parse()
	if *doList {
		list()
		return
	}
	if *logPath == "" || *profileList == "" {
		fmt.Fprintln(os.Stderr, "conformance-summary: -log and -profiles are required (or -list)")
		os.Exit(2)
	}

	results := map[string]string{}
	top := ""
	var inferred []string
	inferredSeen := false
	f, err := os.Open(*logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance-summary:", err)
		os.Exit(2)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := resultRE.FindStringSubmatch(line); m != nil {
			results[m[2]] = m[1]
		} else if m := topRE.FindStringSubmatch(line); m != nil {
			top = m[1]
		} else if m := supportedRE.FindStringSubmatch(line); m != nil && !inferredSeen {
			inferredSeen = true
			inferred = strings.Fields(m[1])
		}
	}
	f.Close()

	skipped := sets.New[string]()
	for _, s := range strings.Split(*skipList, ",") {
		if s = strings.TrimSpace(s); s != "" {
			skipped.Insert(s)
		}
	}
	var requested []string
	supported := sets.New[features.FeatureName]()
	for _, f := range inferred {
		supported.Insert(features.FeatureName(f))
	}
	for _, n := range strings.Split(*profileList, ",") {
		p, ok := profiles[n]
		if !ok {
			fmt.Fprintf(os.Stderr, "conformance-summary: unknown profile %q\n", n)
			os.Exit(2)
		}
		requested = append(requested, n)
		supported = supported.Union(p.CoreFeatures)
	}

	if len(results) == 0 {
		fmt.Printf("The suite ran no test (its Setup failed, or it was stopped): TestConformance %s. See the log %s.\n", orDash(top), *logPath)
		os.Exit(1)
	}

	var report *confv1.ConformanceReport
	if *reportPath != "" {
		if data, err := os.ReadFile(*reportPath); err == nil {
			report = &confv1.ConformanceReport{}
			if err := yaml.Unmarshal(data, report); err != nil {
				fmt.Fprintf(os.Stderr, "conformance-summary: %s: %v\n", *reportPath, err)
				report = nil
			}
		} else {
			fmt.Printf("No report at %s (%v).\n", *reportPath, err)
		}
	}

	if inferredSeen {
		fmt.Printf("Features inferred from the GatewayClass (%d): %s\n", len(inferred), strings.Join(inferred, " "))
	}
	var failed []string
	for name, r := range results {
		if r == "FAIL" {
			failed = append(failed, name)
		}
	}
	sort.Strings(failed)

	fmt.Printf("\n%-14s %-9s %7s %7s %8s %14s\n", "profile", "level", "passed", "failed", "skipped", "not supported")
	mismatch, missing := false, false
	for _, n := range requested {
		p := profiles[n]
		byLevel := map[string]*counts{"core": {}, "extended": {}}
		for _, t := range gatewayTests() {
			l := level(p, t)
			if l == "" {
				continue
			}
			c := byLevel[l]
			switch r, ran := results[t.ShortName]; {
			case !ran:
				c.missing++ // the suite stopped before it (timeout, panic)
			case skipped.Has(t.ShortName):
				c.skipped++
			case r == "SKIP":
				if supported.HasAll(t.Features...) {
					c.skipped++ // skipped by the test itself (or --run-test)
				} else {
					c.notSupported++
				}
			case r == "PASS":
				c.passed++
			default:
				c.failed++
			}
		}
		for _, l := range []string{"core", "extended"} {
			c := byLevel[l]
			fmt.Printf("%-14s %-9s %7d %7d %8d %14d\n", n, l, c.passed, c.failed, c.skipped, c.notSupported)
			if c.missing > 0 {
				missing = true
				fmt.Printf("%-14s %-9s %d tests have no result in the log: the suite stopped before them\n", "", "", c.missing)
			}
			if report != nil {
				if rs, ok := reportStatus(report, n, l); ok && (rs.Passed != uint32(c.passed) || rs.Failed != uint32(c.failed) || rs.Skipped != uint32(c.skipped)) {
					mismatch = true
					fmt.Printf("%-14s %-9s %7d %7d %8d   (the report's numbers)\n", "", "", rs.Passed, rs.Failed, rs.Skipped)
				}
			}
		}
	}
	if mismatch {
		fmt.Println("\nThe report differs from the test log: v1.6.1 writes the report before its Parallel tests run,\nso it counts them as passed (kubernetes-sigs/gateway-api#5142). The log's numbers are the real ones.")
	}
	if report != nil && len(report.SucceededProvisionalTests) > 0 {
		fmt.Printf("\nProvisional tests that passed (the report's list): %s\n", strings.Join(report.SucceededProvisionalTests, ", "))
	}
	if len(failed) > 0 {
		fmt.Printf("\nFailed (%d): %s\n", len(failed), strings.Join(failed, ", "))
		os.Exit(1)
	}
	if missing {
		fmt.Println("\nThe suite stopped before it ran every test (see the end of the log).")
		os.Exit(1)
	}
	if top == "FAIL" {
		fmt.Println("\nNo test failed, but TestConformance did (see the log).")
		os.Exit(1)
	}
	fmt.Println("\nNo test that ran failed.")
}

func reportStatus(r *confv1.ConformanceReport, profile, l string) (confv1.Statistics, bool) {
	for _, p := range r.ProfileReports {
		if p.Name != profile {
			continue
		}
		if l == "core" {
			return p.Core.Statistics, true
		}
		if p.Extended != nil {
			return p.Extended.Statistics, true
		}
		return confv1.Statistics{}, true
	}
	return confv1.Statistics{}, false
}

func orDash(s string) string {
	if s == "" {
		return "did not finish"
	}
	return s
}
