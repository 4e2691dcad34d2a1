import io.anserini.search.topicreader.*;
import com.fasterxml.jackson.databind.*;
import com.fasterxml.jackson.databind.node.*;
import java.nio.file.*;
import java.util.*;

// Writes the topics as Anserini's topic reader parses them: JSON lines {"id", "contents": title}.
public class Topics {
  public static void main(String[] args) throws Exception {
    TopicReader<?> r = args[0].equals("Cacm") ? new CacmTopicReader(Paths.get(args[1])) : new TsvStringTopicReader(Paths.get(args[1]));
    ObjectMapper m = new ObjectMapper();
    try (var w = new java.io.PrintWriter(Files.newBufferedWriter(Paths.get(args[2])))) {
      for (var e : r.read().entrySet()) {
        ObjectNode o = m.createObjectNode();
        o.put("id", String.valueOf(e.getKey()));
        o.put("contents", ((Map<String, String>) e.getValue()).get("title"));
        w.println(m.writeValueAsString(o));
      }
    }
  }
}
