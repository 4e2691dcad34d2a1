import com.fasterxml.jackson.databind.*;
import com.fasterxml.jackson.databind.node.*;
import io.anserini.analysis.DefaultEnglishAnalyzer;
import org.apache.lucene.analysis.*;
import org.apache.lucene.analysis.standard.StandardTokenizer;
import org.apache.lucene.analysis.tokenattributes.*;
import java.io.*;
import java.nio.file.*;
import java.util.*;

// Reads JSON lines {"id", "contents"}; writes {"id", "std": StandardTokenizer tokens, "ana": DefaultEnglishAnalyzer tokens}.
public class Analyze {
  static List<String> run(Analyzer a, String text) throws IOException {
    List<String> out = new ArrayList<>();
    try (TokenStream ts = a.tokenStream("contents", text)) {
      CharTermAttribute t = ts.addAttribute(CharTermAttribute.class);
      ts.reset();
      while (ts.incrementToken()) out.add(t.toString());
      ts.end();
    }
    return out;
  }
  public static void main(String[] args) throws Exception {
    Analyzer std = new Analyzer() {
      protected TokenStreamComponents createComponents(String f) { return new TokenStreamComponents(new StandardTokenizer()); }
    };
    Analyzer ana = DefaultEnglishAnalyzer.newDefaultInstance();
    ObjectMapper m = new ObjectMapper();
    try (BufferedReader r = Files.newBufferedReader(Paths.get(args[0])); PrintWriter w = new PrintWriter(Files.newBufferedWriter(Paths.get(args[1])))) {
      String line;
      while ((line = r.readLine()) != null) {
        JsonNode d = m.readTree(line);
        String text = d.get("contents").asText();
        ObjectNode o = m.createObjectNode();
        o.put("id", d.get("id").asText());
        ArrayNode a1 = o.putArray("std"); for (String s : run(std, text)) a1.add(s);
        ArrayNode a2 = o.putArray("ana"); for (String s : run(ana, text)) a2.add(s);
        w.println(m.writeValueAsString(o));
      }
    }
  }
}
